"""PyStats: describe a list of numbers (tavern / VCPToolBox stdio contract)."""
import json
import os
import statistics
import sys


def answer(obj):
    sys.stdout.write(json.dumps(obj))
    sys.stdout.flush()


def main():
    try:
        args = json.load(sys.stdin)
    except ValueError as e:
        answer({"status": "error", "error": "arguments are not JSON: %s" % e})
        return
    numbers = args.get("numbers")
    if isinstance(numbers, str):
        # A model may write the list as text: "1, 2, 3" or "[1, 2, 3]".
        text = numbers.strip().strip("[]")
        try:
            numbers = [float(x) for x in text.replace(",", " ").split()]
        except ValueError:
            answer({"status": "error", "error": "numbers must be a list of numbers"})
            return
    if not isinstance(numbers, list) or not numbers:
        answer({"status": "error", "error": "numbers must be a non-empty list of numbers"})
        return
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in numbers):
        answer({"status": "error", "error": "every item of numbers must be a number"})
        return
    try:
        precision = int(os.environ.get("precision", "6"))
    except ValueError:
        precision = 6
    r = lambda x: round(float(x), precision)
    answer({
        "status": "success",
        "result": {
            "count": len(numbers),
            "sum": r(sum(numbers)),
            "mean": r(statistics.fmean(numbers)),
            "median": r(statistics.median(numbers)),
            "stdev": r(statistics.pstdev(numbers)),
            "min": r(min(numbers)),
            "max": r(max(numbers)),
        },
    })


if __name__ == "__main__":
    main()
