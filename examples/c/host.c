/*
 * A small C game host for tavern: registers two host tools (world:get, world:publish),
 * runs a Lua mod's tool with tavern_engine_call, then the same through the frame-budgeted
 * submit / pump / take loop, and checks the error paths (NULL, invalid UTF-8, bad JSON).
 * Every exported function is called; every returned string is freed.
 *
 *   cc -I include examples/c/host.c -L target/release -ltavern_capi -o host
 *   ./host HOME        (HOME holds plugins/, see capi/tests/c_example.rs)
 *
 * Exit status 0 when every check passed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tavern.h"

static int failures = 0;

#define CHECK(cond, what)                                                          \
    do {                                                                           \
        if (!(cond)) {                                                             \
            const char *e = tavern_last_error();                                   \
            fprintf(stderr, "FAIL %s (line %d): last error: %s\n", what, __LINE__, \
                    e ? e : "(none)");                                             \
            failures++;                                                            \
        }                                                                          \
    } while (0)

/* The world: a gold counter and the last published event. */
struct world {
    int gold;
    char last_event[128];
};

static char *dup_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

/* world:get -> {"gold": N}; the engine frees the result with free(). */
static char *world_get(void *user_data, const char *args_json) {
    struct world *w = user_data;
    char buf[64];
    (void)args_json;
    snprintf(buf, sizeof buf, "{\"gold\": %d}", w->gold);
    return dup_string(buf);
}

/* world:publish {event} -> true; adds one gold per event. */
static char *world_publish(void *user_data, const char *args_json) {
    struct world *w = user_data;
    snprintf(w->last_event, sizeof w->last_event, "%s", args_json);
    w->gold += 1;
    return dup_string("true");
}

static char *always_fails(void *user_data, const char *args_json) {
    (void)user_data;
    (void)args_json;
    return dup_string("{\"error\": \"the bridge is out\"}");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: host HOME\n");
        return 2;
    }
    struct world w = {10, ""};

    /* Bad input: NULL and a missing directory. */
    CHECK(tavern_engine_new(NULL) == NULL, "new(NULL) fails");
    CHECK(tavern_last_error() != NULL, "new(NULL) sets the last error");
    CHECK(tavern_engine_new("/nonexistent/tavern-home") == NULL, "new(missing dir) fails");

    TavernEngine *engine = tavern_engine_new(argv[1]);
    CHECK(engine != NULL, "new(home)");
    if (!engine) return 1;
    CHECK(tavern_last_error() == NULL, "success clears the last error");

    CHECK(tavern_engine_register_tool(
              engine,
              "{\"id\": \"world:get\", \"description\": \"Reads the world state.\"}",
              world_get, &w) == 0,
          "register world:get");
    CHECK(tavern_engine_register_tool(
              engine,
              "{\"id\": \"world:publish\", \"description\": \"Publishes an event.\", "
              "\"parameters\": {\"type\": \"object\", \"properties\": {\"event\": {\"type\": "
              "\"string\"}}, \"required\": [\"event\"]}}",
              world_publish, &w) == 0,
          "register world:publish");
    CHECK(tavern_engine_register_tool(engine, "{\"id\": \"world:fail\"}", always_fails, NULL) == 0,
          "register world:fail");
    /* Bad definitions. */
    CHECK(tavern_engine_register_tool(engine, "{not json", world_get, &w) == -1, "malformed JSON");
    CHECK(tavern_last_error() && strstr(tavern_last_error(), "JSON"), "malformed JSON message");
    CHECK(tavern_engine_register_tool(engine, "{\"id\": \"world:x\"}", NULL, &w) == -1,
          "NULL callback");
    CHECK(tavern_engine_register_tool(engine, "\"\xff\xfe\"", world_get, &w) == -1,
          "invalid UTF-8");
    CHECK(tavern_engine_register_tool(NULL, "{}", world_get, &w) == -1, "NULL engine");
    CHECK(tavern_engine_register_tool(engine, "{\"id\": \"world:get\"}", world_get, &w) == -1,
          "duplicate id");

    /* A blocking call: the mod's tool reads the world through the host tool. */
    const char *call_mod =
        "<|[REQUEST_TOOL]|>\ncommand:「始」quest:reward「末」\namount:「始」5「末」\n<|[END_TOOL]|>\n";
    char *out = tavern_engine_call(engine, call_mod);
    CHECK(out != NULL, "call");
    CHECK(out && strstr(out, "\"ok\":true"), "call succeeded");
    CHECK(out && strstr(out, "\"total\":15"), "mod saw the host's gold");
    tavern_string_free(out);

    out = tavern_engine_call(engine,
                             "<|[REQUEST_TOOL]|>\ncommand:「始」world:fail「末」\n<|[END_TOOL]|>\n");
    CHECK(out && strstr(out, "the bridge is out"), "callback error is a failed call");
    tavern_string_free(out);

    CHECK(tavern_engine_call(engine, NULL) == NULL, "call(NULL text)");
    CHECK(tavern_engine_call(NULL, call_mod) == NULL, "call(NULL engine)");
    CHECK(tavern_engine_call(engine, "\xc3\x28") == NULL, "call(invalid UTF-8)");
    CHECK(tavern_last_error() && strstr(tavern_last_error(), "UTF-8"), "UTF-8 message");

    /* Frame-budgeted: submit, then pump 1 ms per frame until the result is in. */
    const char *publish =
        "<|[REQUEST_TOOL]|>\ncommand:「始」world:publish「末」\nevent:「始」dragon slain「末」\n<|[END_TOOL]|>\n";
    uint64_t t = tavern_engine_submit(engine, publish);
    CHECK(t != 0, "submit");
    CHECK(tavern_engine_take(engine, t) == NULL && tavern_last_error() == NULL,
          "take before a pump is pending");
    char *result = NULL;
    uint32_t finished = 0;
    for (int frame = 0; frame < 20000 && !result; frame++) {
        finished += tavern_engine_pump(engine, 1000);
        result = tavern_engine_take(engine, t);
    }
    CHECK(finished == 1, "one submission finished");
    CHECK(result && strstr(result, "\"ok\":true"), "submitted call succeeded");
    CHECK(strstr(w.last_event, "dragon slain") != NULL, "the host saw the event");
    tavern_string_free(result);
    CHECK(tavern_engine_take(engine, t) == NULL && tavern_last_error() != NULL,
          "a taken ticket is forgotten");
    CHECK(tavern_engine_pump(engine, 1000) == 0, "pump with nothing queued");
    CHECK(tavern_engine_submit(engine, NULL) == 0, "submit(NULL)");
    CHECK(tavern_engine_pump(NULL, 10) == 0 && tavern_last_error() != NULL, "pump(NULL)");
    CHECK(tavern_engine_take(NULL, 1) == NULL, "take(NULL engine)");

    tavern_string_free(NULL);
    tavern_engine_free(NULL);
    tavern_engine_free(engine);

    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("c host: all checks passed\n");
    return 0;
}
