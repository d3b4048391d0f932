/*
 * A small C game host for tavern: registers host tools (world:get, world:publish), a
 * main-thread tool (world:spawn, which only this thread may run) and a log callback, builds
 * the engine and reads its load problems, runs a Lua mod's tools with tavern_engine_call,
 * then through the frame-budgeted submit / pump / take loop (with a per-call timeout, a
 * caller, and a cancel), and checks the error paths (NULL, invalid UTF-8, bad JSON, a
 * missing local model).
 * Every exported function is called; every returned string is freed.
 *
 *   cc -I include examples/c/host.c -L target/release -ltavern_capi -o host
 *   ./host HOME        (HOME holds plugins/, see capi/tests/c_example.rs)
 *
 * Exit status 0 when every check passed.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* The world: a gold counter, the last published event, and actors only the game
 * thread may spawn. */
struct world {
    int gold;
    char last_event[128];
    int spawned;
    int spawned_off_thread;
    char last_caller[64];
};

static pthread_t game_thread;

/* What the log callback heard. */
struct log_seen {
    int lines;
    int mod_print;
    int load_warning;
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
    const char *caller = tavern_current_caller();
    (void)args_json;
    snprintf(w->last_caller, sizeof w->last_caller, "%s", caller ? caller : "(none)");
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

/* world:spawn {kind} -> {"id": N}: a main-thread tool, so it runs only on this thread,
 * inside tavern_engine_pump (or while tavern_engine_call waits on this thread). */
static char *world_spawn(void *user_data, const char *args_json) {
    struct world *w = user_data;
    char buf[64];
    (void)args_json;
    if (!pthread_equal(pthread_self(), game_thread)) w->spawned_off_thread++;
    w->spawned += 1;
    snprintf(buf, sizeof buf, "{\"id\": %d}", w->spawned);
    return dup_string(buf);
}

static void on_log(void *user_data, int level, const char *source, const char *message) {
    struct log_seen *seen = user_data;
    seen->lines++;
    if (level == TAVERN_LOG_INFO && strcmp(source, "plugin:quest") == 0 &&
        strstr(message, "reward given"))
        seen->mod_print++;
    if (level == TAVERN_LOG_WARN && strstr(source, "broken")) seen->load_warning++;
}

/* The rest of a frame: pump returns as soon as its own work is done. */
static void rest_of_frame(void) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
}

/* Pumps one frame budget (1 ms) at a time until `t` is taken; NULL after 20000 frames. */
static char *pump_until(TavernEngine *engine, uint64_t t) {
    char *result = NULL;
    for (int frame = 0; frame < 20000 && !result; frame++) {
        tavern_engine_pump(engine, 1000);
        result = tavern_engine_take(engine, t);
        if (!result) rest_of_frame();
    }
    return result;
}

/* Returns its result through tavern_malloc_string (what a host without malloc uses). */
static char *always_fails(void *user_data, const char *args_json) {
    (void)user_data;
    (void)args_json;
    return tavern_malloc_string("{\"error\": \"the bridge is out\"}");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: host HOME\n");
        return 2;
    }
    struct world w = {10, "", 0, 0, ""};
    struct log_seen seen = {0, 0, 0};
    game_thread = pthread_self();

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
    CHECK(tavern_engine_register_main_thread_tool(
              engine,
              "{\"id\": \"world:spawn\", \"description\": \"Spawns an actor (game thread only).\", "
              "\"parameters\": {\"type\": \"object\", \"properties\": {\"kind\": {\"type\": "
              "\"string\"}}, \"required\": [\"kind\"]}}",
              world_spawn, &w) == 0,
          "register main-thread world:spawn");
    CHECK(tavern_engine_register_main_thread_tool(engine, "{\"id\": \"world:x\"}", NULL, &w) == -1,
          "main-thread tool with a NULL callback");
    CHECK(tavern_engine_register_main_thread_tool(engine, "{\"id\": \"world:get\"}", world_get,
                                                  &w) == -1,
          "main-thread tool with a taken id");

    /* A model run in-process (the llm-local feature): a missing file is refused at once, and
     * so is any file when the library was built without llama.cpp. */
    CHECK(tavern_engine_set_local_model(engine, "models/missing.gguf") == -1,
          "set_local_model(missing file)");
    CHECK(tavern_last_error() && strstr(tavern_last_error(), "missing.gguf") &&
              (strstr(tavern_last_error(), "no such file") ||
               strstr(tavern_last_error(), "llm-local")),
          "set_local_model names the file and says what is wrong");
    CHECK(tavern_engine_set_local_model(engine, NULL) == -1, "set_local_model(NULL path)");
    CHECK(tavern_engine_set_local_model(NULL, "m.gguf") == -1, "set_local_model(NULL engine)");

    /* The log callback first, so the load problems reach it too. */
    tavern_engine_set_log_callback(NULL, on_log, &seen);
    CHECK(tavern_last_error() != NULL, "set_log_callback(NULL engine)");
    tavern_engine_set_log_callback(engine, on_log, &seen);

    /* Build now: plugins load here, not in the first call. The home has a broken plugin. */
    int problems = tavern_engine_build(engine);
    CHECK(problems >= 1, "build reports the broken plugin");
    CHECK(tavern_engine_build(engine) == problems, "a second build gives the same count");
    CHECK(tavern_engine_build(NULL) == -1, "build(NULL)");
    char *pj = tavern_engine_problems(engine);
    CHECK(pj && pj[0] == '[', "problems is a JSON array");
    CHECK(pj && strstr(pj, "\"file\"") && strstr(pj, "\"message\"") && strstr(pj, "broken"),
          "problems name the file and say what is wrong");
    tavern_string_free(pj);
    CHECK(tavern_engine_problems(NULL) == NULL, "problems(NULL)");
    CHECK(seen.load_warning >= 1, "the log callback heard the load problem");

    /* A blocking call: the mod's tool reads the world through the host tool. */
    const char *call_mod =
        "<|[REQUEST_TOOL]|>\ncommand:「始」quest:reward「末」\namount:「始」5「末」\n<|[END_TOOL]|>\n";
    char *out = tavern_engine_call(engine, call_mod);
    CHECK(out != NULL, "call");
    CHECK(out && strstr(out, "\"ok\":true"), "call succeeded");
    CHECK(out && strstr(out, "\"total\":15"), "mod saw the host's gold");
    tavern_string_free(out);
    CHECK(seen.mod_print == 1, "the log callback heard the mod's print");
    CHECK(strcmp(w.last_caller, "plugin:quest") == 0, "the callback saw who called it");
    CHECK(tavern_current_caller() == NULL, "no caller outside a callback");
    char *copy = tavern_malloc_string("{}");
    CHECK(copy && strcmp(copy, "{}") == 0, "malloc_string copies");
    free(copy);
    CHECK(tavern_malloc_string(NULL) == NULL && tavern_last_error() != NULL, "malloc_string(NULL)");

    /* A mod calling the main-thread tool from a blocking call on this thread: the tool
     * runs here while the call waits. */
    const char *summon =
        "<|[REQUEST_TOOL]|>\ncommand:「始」quest:summon「末」\nkind:「始」goblin「末」\n<|[END_TOOL]|>\n";
    out = tavern_engine_call(engine, summon);
    CHECK(out && strstr(out, "\"ok\":true") && strstr(out, "\"spawned\":1"),
          "the mod resumed with the main-thread tool's result");
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
    int finished = 0;
    uint64_t done[4] = {0, 0, 0, 0};
    for (int frame = 0; frame < 20000 && !result; frame++) {
        int n = tavern_engine_pump_finished(engine, 1000, done, 4);
        CHECK(n >= 0, "pump_finished");
        if (n > 0) {
            finished += n;
            CHECK(done[0] == t, "pump_finished names the finished ticket");
        }
        result = tavern_engine_take(engine, t);
        if (!result) rest_of_frame();
    }
    CHECK(finished == 1, "one submission finished");
    CHECK(tavern_engine_pump_finished(NULL, 0, done, 4) == -1, "pump_finished(NULL engine)");
    CHECK(tavern_engine_pump_finished(engine, 0, NULL, 4) == -1, "pump_finished(NULL array)");
    CHECK(result && strstr(result, "\"ok\":true"), "submitted call succeeded");
    CHECK(strstr(w.last_event, "dragon slain") != NULL, "the host saw the event");
    tavern_string_free(result);
    CHECK(tavern_engine_take(engine, t) == NULL && tavern_last_error() != NULL,
          "a taken ticket is forgotten");
    CHECK(tavern_engine_pump(engine, 1000) == 0, "pump with nothing queued");
    CHECK(tavern_engine_pump(engine, 0) == 0, "the non-blocking poll");

    /* Options: a model caller and a timeout; the main-thread tool runs in this thread's pump. */
    t = tavern_engine_submit_with(engine, summon,
                                  "{\"timeout_ms\": 60000, \"caller\": \"model:npc-1\", "
                                  "\"refuse_on_warnings\": true}");
    CHECK(t != 0, "submit_with");
    result = pump_until(engine, t);
    CHECK(result && strstr(result, "\"spawned\":2"), "submitted mod call reached world:spawn");
    tavern_string_free(result);
    CHECK(w.spawned == 2 && w.spawned_off_thread == 0, "world:spawn ran on this thread only");

    /* A per-call timeout ends a looping mod. */
    const char *spin = "<|[REQUEST_TOOL]|>\ncommand:「始」quest:spin「末」\n<|[END_TOOL]|>\n";
    t = tavern_engine_submit_with(engine, spin, "{\"timeout_ms\": 100}");
    CHECK(t != 0, "submit_with a timeout");
    result = pump_until(engine, t);
    CHECK(result && strstr(result, "\"code\":\"timeout\""), "the timeout ended the loop");
    tavern_string_free(result);

    /* Cancel ends another; a finished ticket has nothing to cancel. */
    t = tavern_engine_submit(engine, spin);
    CHECK(t != 0, "submit the loop");
    CHECK(tavern_engine_cancel(engine, t) == 0, "cancel a running call");
    result = pump_until(engine, t);
    CHECK(result && strstr(result, "\"code\":\"cancelled\""), "cancel ended the loop");
    tavern_string_free(result);
    CHECK(tavern_engine_cancel(engine, t) == -1 && tavern_last_error() != NULL,
          "cancel of a taken ticket");
    CHECK(tavern_engine_cancel(NULL, 1) == -1, "cancel(NULL engine)");

    /* Bad options. */
    CHECK(tavern_engine_submit_with(engine, spin, "{\"timeout\": 5}") == 0 &&
              tavern_last_error() && strstr(tavern_last_error(), "timeout_ms"),
          "an unknown option names the known ones");
    CHECK(tavern_engine_submit_with(engine, spin, "{\"caller\": \"robot\"}") == 0,
          "an unknown caller");
    CHECK(tavern_engine_submit_with(engine, spin, "[") == 0, "malformed options JSON");
    CHECK(tavern_engine_submit_with(NULL, spin, NULL) == 0, "submit_with(NULL engine)");

    /* Back to the default log (stderr) before the callback's data goes away. */
    tavern_engine_set_log_callback(engine, NULL, NULL);
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
