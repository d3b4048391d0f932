// GameLoop.cs: examples/game_host.rs in C#, over bindings/csharp/Tavern.cs (the C ABI).
// A fixed-step loop (60 ticks a second) owns a world state and offers it to models and mods
// through two main-thread host tools (ReadWorldStateTool, PublishEventTool); a Lua mod adds
// weather:forecast, which reads the world through them; model output runs through
// Submit / Pump / Take so no frame waits on a script for more than its budget.
//
//   cargo build --release -p tavern-capi
//   mcs -out:GameLoop.exe bindings/csharp/Tavern.cs examples/csharp/GameLoop.cs
//   LD_LIBRARY_PATH=target/release mono GameLoop.exe
//
// The world is the game thread's alone (no lock): the world tools are main-thread tools,
// so they run only inside Pump, on this thread, between simulation steps.

using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Threading;
using Tavern;

static class GameLoop
{
    const string WeatherMod = @"
api.tools.register({
  id = ""forecast"",
  description = ""Tells the weather tomorrow from today's (reads the world state)."",
  handler = function(args)
    local today = api.tools.call(""ReadWorldStateTool"",
      {path = ""environment.weather"", default_value = ""unknown""})
    local next = ({sunny = ""cloudy"", cloudy = ""rain"", rain = ""sunny""})[today] or ""unknown""
    api.tools.call(""PublishEventTool"", {event_type = ""weather.forecast"", payload = {tomorrow = next}})
    api.log.info(""forecast: "" .. today .. "" then "" .. next)
    return {today = today, tomorrow = next}
  end,
})
";

    static object ReadPath(object state, string path)
    {
        foreach (var key in path.Split('.'))
        {
            var o = state as IDictionary<string, object>;
            if (o == null || !o.TryGetValue(key, out state)) return null;
        }
        return state;
    }

    static int Main()
    {
        // A home with one Lua mod (a real game would point at its mods directory).
        var home = Path.Combine(Path.GetTempPath(), "tavern-gameloop-" + Guid.NewGuid().ToString("N"));
        var dir = Path.Combine(home, "plugins", "weather");
        Directory.CreateDirectory(dir);
        // The mod may call the two host tools it uses, and nothing else of the host's.
        File.WriteAllText(Path.Combine(dir, "plugin.yaml"),
            "name: weather\nversion: 1.0.0\npermissions:\n  tools: [ReadWorldStateTool, PublishEventTool]\n");
        File.WriteAllText(Path.Combine(dir, "main.lua"), WeatherMod);
        try
        {
            return Run(home);
        }
        finally
        {
            Directory.Delete(home, true);
        }
    }

    static int Run(string home)
    {
        // The game thread's world: no lock.
        var world = (IDictionary<string, object>)Json.Parse(
            "{\"environment\": {\"weather\": \"sunny\", \"time\": {\"current_hour\": 9}}}");
        var events = new List<KeyValuePair<string, object>>();

        using (var engine = new Engine(home))
        {
            // Mods' print / api.log lines and the engine's warnings, with their source.
            engine.SetLogCallback(r => Console.WriteLine("[" + r.Level + "] " + r.Source + ": " + r.Message));
            // Main-thread tools: run inside engine.Pump on this thread only.
            engine.RegisterMainThreadTool(
                new ToolDefinition("ReadWorldStateTool", "Reads a value from the shared world state.",
                    "{\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}, \"default_value\": {}}, \"required\": [\"path\"]}"),
                call =>
                {
                    var path = Json.Get(call.Args, "path") as string ?? "";
                    return ReadPath(world, path) ?? Json.Get(call.Args, "default_value");
                });
            engine.RegisterMainThreadTool(
                new ToolDefinition("PublishEventTool", "Publishes an event to the event bus.",
                    "{\"type\": \"object\", \"properties\": {\"event_type\": {\"type\": \"string\"}, \"payload\": {\"type\": \"object\"}}, \"required\": [\"event_type\"]}"),
                call =>
                {
                    var kind = Json.Get(call.Args, "event_type") as string ?? "";
                    events.Add(new KeyValuePair<string, object>(
                        kind + " (from " + call.Caller + ")", Json.Get(call.Args, "payload")));
                    return true;
                });
            foreach (var p in engine.Build())
                Console.Error.WriteLine("warning: " + p);

            // What a model said this turn (seed 002's <ACTION> form, then a TAM call of the mod's tool).
            var modelTurns = new[]
            {
                "Let me look outside.\n<ACTION>\n  <ReadWorldStateTool>\n    <path>environment.weather</path>\n  </ReadWorldStateTool>\n</ACTION>",
                "<|[REQUEST_TOOL]|>\ncommand:「始」weather:forecast「末」\n<|[END_TOOL]|>",
            };
            // Built once, used for every call: the 2 s count from each submit.
            var opts = new CallOptions { Caller = "model:npc-1", Timeout = TimeSpan.FromSeconds(2) };
            var tickets = new List<Ticket>();
            foreach (var t in modelTurns) tickets.Add(engine.Submit(t, opts));

            // The fixed-step loop: simulate, then give the engine at most 1 ms of the frame.
            var step = TimeSpan.FromTicks(166670);
            var worstPump = TimeSpan.Zero;
            for (int tick = 0; tick < 600; tick++)
            {
                var frame = Stopwatch.StartNew();
                var time = (IDictionary<string, object>)ReadPath(world, "environment.time");
                time["current_hour"] = 9 + tick / 60;
                var pump = Stopwatch.StartNew();
                var finished = engine.Pump(TimeSpan.FromMilliseconds(1));
                if (pump.Elapsed > worstPump) worstPump = pump.Elapsed;
                foreach (var t in finished)
                {
                    tickets.Remove(t);
                    var report = engine.Take(t);
                    if (report == null) continue;
                    foreach (var r in report.Results)
                        Console.WriteLine("tick " + tick + ": " + r.Tool + " -> " + r.Observation);
                }
                if (tickets.Count == 0) break;
                var rest = step - frame.Elapsed;
                if (rest > TimeSpan.Zero) Thread.Sleep(rest);
            }
            foreach (var e in events)
                Console.WriteLine("event " + e.Key + ": " + Json.Write(e.Value));
            Console.WriteLine("longest pump: " + worstPump.TotalMilliseconds.ToString("0.000") + " ms");
            return tickets.Count == 0 ? 0 : 1;
        }
    }
}
