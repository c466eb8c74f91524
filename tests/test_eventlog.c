/* test_eventlog.c: the event log writes whole lines, reads them back in order, skips a torn
 * last line (what kill -9 mid-write leaves) and reports a damaged line in the middle. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flaretune/eventlog.h"
#include "ft_test.h"

static char path[64];

static void listener(void *ctx, const json_t *ev) {
    int *n = ctx;
    if (json_is_string(json_object_get(ev, "run"))) (*n)++;
}

static void test_write_read(void) {
    unlink(path);
    ft_eventlog *log;
    ft_err err = {0};
    FT_CHECK(ft_eventlog_open(path, "r1", &log, &err) == FT_OK, "%s", err.msg);
    int heard = 0;
    ft_eventlog_set_listener(log, listener, &heard);
    for (int i = 0; i < 5; i++)
        FT_CHECK(ft_eventlog_write(log, json_pack("{s:s, s:i}", "event", "measured", "i", i), &err) ==
                     FT_OK,
                 "%s", err.msg);
    ft_eventlog_close(log);
    FT_CHECK(heard == 5, "the listener saw every event stamped with the run id: %d", heard);
    /* Appending: a second run in the same file. */
    FT_CHECK(ft_eventlog_open(path, "r2", &log, &err) == FT_OK, "%s", err.msg);
    ft_eventlog_write(log, json_pack("{s:s}", "event", "run_start"), &err);
    ft_eventlog_close(log);
    json_t *evs;
    int torn;
    FT_CHECK(ft_eventlog_read(path, &evs, &torn, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(json_array_size(evs) == 6 && !torn, "6 events, none torn");
    for (int i = 0; i < 5; i++) {
        json_t *ev = json_array_get(evs, (size_t)i);
        FT_CHECK(json_integer_value(json_object_get(ev, "i")) == i, "order");
        FT_CHECK(!strcmp(json_string_value(json_object_get(ev, "run")), "r1"), "run id");
        FT_CHECK(json_real_value(json_object_get(ev, "t")) > 1.6e9, "wall-clock stamp");
    }
    FT_CHECK(!strcmp(json_string_value(json_object_get(json_array_get(evs, 5), "run")), "r2"),
             "second run appended");
    json_decref(evs);
}

static void test_torn_and_damaged(void) {
    FILE *f = fopen(path, "a");
    fputs("{\"event\": \"measured\", \"config\": {\"tile\"", f); /* the process died here */
    fclose(f);
    json_t *evs;
    int torn;
    ft_err err = {0};
    FT_CHECK(ft_eventlog_read(path, &evs, &torn, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(torn == 1 && json_array_size(evs) == 6, "torn last line skipped");
    json_decref(evs);
    /* The same damage followed by more lines is not a crash's trace: report it. */
    f = fopen(path, "a");
    fputs("\n{\"event\": \"run_end\"}\n", f);
    fclose(f);
    FT_CHECK(ft_eventlog_read(path, &evs, &torn, &err) == FT_EFORMAT, "damaged middle line");
    FT_CHECK(strstr(err.msg, ":7:") != NULL, "message names the line: %s", err.msg);
    FT_CHECK(ft_eventlog_read("/nonexistent/log", &evs, &torn, &err) == FT_EIO, "missing file");
}

int main(void) {
    snprintf(path, sizeof path, "/tmp/ft_test_eventlog.%d.jsonl", (int)getpid());
    FT_RUN(test_write_read);
    FT_RUN(test_torn_and_damaged);
    unlink(path);
    return ft_test_finish();
}
