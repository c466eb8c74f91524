/* cli_mpi.c: distributed tuning over MPI (docs/distributed.md).
 *
 * Under mpirun (or srun) every rank runs the same command line. Rank 0 runs the tuning sessions:
 * it alone reads and writes the event log and the profile; the other ranks are its workers,
 * each evaluating the candidates rank 0 hands it on its own device (ft_tune_serve). Messages are
 * JSON text: a candidate {"job", "config", "best"} (tag CAND), the end of a job's session (tag
 * JOBEND) and of the whole run (ALLDONE) from rank 0, the events of one evaluation (tag RESULT)
 * back. With several jobs (`tune all`, --sweep) the ranks form groups, one job at a time each,
 * so jobs run side by side; rank 0 runs each group's session on a thread and measures in the
 * first group only. Ranks on different kinds of device (fingerprints) first split into one
 * run per kind, each led by its first rank ("rank 0" above is that rank). A rank that dies ends the job (MPI's
 * default error handler); what rank 0 had received is in the log, and the same command resumes
 * from it. Without MPI in the build, or without a launcher, this is a single process.
 */
#define _GNU_SOURCE /* sched_setaffinity */
#include "cli_mpi.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if FT_HAVE_MPI
#include <mpi.h>
#endif


#if FT_HAVE_MPI
/* world_rank/world_size: this process in the whole job; rank/size: in its group of ranks on
 * one kind of device (the whole job until ft_cli_mpi_split_by_device). */
static int world_rank, world_size = 1, rank, size = 1, local_rank, local_size = 1;

int ft_cli_mpi_rank(void) { return rank; }
int ft_cli_mpi_size(void) { return size; }
int ft_cli_mpi_world_rank(void) { return world_rank; }

enum { TAG_CAND = 1, TAG_JOBEND = 2, TAG_RESULT = 3, TAG_ALLDONE = 4 };

/* Rank 0 may run several sessions at once (one per group of ranks, on threads): its MPI calls
 * take turns under this lock (MPI_THREAD_SERIALIZED), and its receives poll so that no thread
 * holds the lock while waiting. */
static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;
static MPI_Comm comm; /* the ranks on this process's kind of device */

static int launched(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK") ||
           getenv("SLURM_STEP_NUM_TASKS");
}

/* Split this node's CPUs between its ranks (a contiguous slice each, all of one size: a rank
 * measures with the threads its slice runs and is keyed by its count, so slices of two sizes
 * would be two kinds of device; the CPUs past the last whole slice stay idle), unless there are
 * more ranks than CPUs (--oversubscribe: then they share); and give each its own GPU. */
static void place(void) {
    if (!getenv("CUDA_VISIBLE_DEVICES")) {
        char v[16];
        snprintf(v, sizeof v, "%d", local_rank);
        setenv("CUDA_VISIBLE_DEVICES", v, 1);
    }
    cpu_set_t all, mine;
    if (local_size < 2 || sched_getaffinity(0, sizeof all, &all) != 0) return;
    int n = CPU_COUNT(&all);
    if (local_size > n) return;
    const int each = n / local_size;
    int lo = local_rank * each, hi = lo + each, k = 0;
    CPU_ZERO(&mine);
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &all)) continue;
        if (k >= lo && k < hi) CPU_SET(c, &mine);
        k++;
    }
    sched_setaffinity(0, sizeof mine, &mine);
}

int ft_cli_mpi_start(int *argc, char ***argv) {
    if (!launched()) return 0;
    int provided;
    MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    comm = MPI_COMM_WORLD;
    rank = world_rank;
    size = world_size;
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_size(node, &local_size);
    MPI_Comm_free(&node);
    place();
    return 1;
}

/* A failing rank asks the launcher to end the job (MPI_Abort). Should this process still run
 * ABORT_GRACE_S later (MPI_Abort waits on the launcher), it ends itself: SIGALRM's default
 * action, which the launcher takes as the job failing. */
enum { ABORT_GRACE_S = 10 };

void ft_cli_mpi_end(int failed) {
    if (world_size > 1 && failed) {
        signal(SIGINT, SIG_DFL); /* the launcher's SIGTERM ends this rank at once */
        signal(SIGTERM, SIG_DFL);
        signal(SIGALRM, SIG_DFL);
        alarm(ABORT_GRACE_S);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int up = 0;
    MPI_Initialized(&up);
    if (up) MPI_Finalize();
}

static void send_text(int to, int tag, const char *text) {
    pthread_mutex_lock(&mpi_lock);
    MPI_Send(text, (int)strlen(text), MPI_CHAR, to, tag, comm);
    pthread_mutex_unlock(&mpi_lock);
}

/* Receive one message from `from` with tag `tag` (MPI_ANY_TAG: any), NUL-terminated; NULL when
 * none came within limit_s seconds (0: no limit). */
static char *recv_text(int from, int tag, int *got_tag, double limit_s) {
    MPI_Status st;
    double until = limit_s > 0 ? MPI_Wtime() + limit_s : 0;
    for (;;) {
        int ready = 0;
        pthread_mutex_lock(&mpi_lock);
        MPI_Iprobe(from, tag, comm, &ready, &st);
        if (ready) break;
        pthread_mutex_unlock(&mpi_lock);
        if (until > 0 && MPI_Wtime() > until) return NULL;
        usleep(200);
    }
    int n = 0;
    MPI_Get_count(&st, MPI_CHAR, &n);
    char *buf = malloc((size_t)n + 1);
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Recv(buf, n, MPI_CHAR, st.MPI_SOURCE, st.MPI_TAG, comm, MPI_STATUS_IGNORE);
    pthread_mutex_unlock(&mpi_lock);
    buf[n] = '\0';
    if (got_tag) *got_tag = st.MPI_TAG;
    return buf;
}

/* ---- rank 0: groups of ranks, one session each ----------------------------------------------- */

typedef struct {
    ft_tune_workers w;
    int job;
    int ranks[FT_CLI_MPI_MAX_RANKS];
    unsigned char answered[FT_CLI_MPI_MAX_RANKS]; /* worker w has sent a result in this job */
} group;

static group groups[FT_CLI_MPI_MAX_RANKS];
static int ngroups;

static ft_status w_send(void *ctx, int w, const json_t *config, double best, ft_err *err) {
    group *g = ctx;
    json_t *m = json_pack("{s:i, s:O, s:f}", "job", g->job, "config", config, "best",
                          isfinite(best) ? best : -1.0);
    char *text = m ? json_dumps(m, JSON_COMPACT) : NULL;
    json_decref(m);
    if (!text) return ft_err_set(err, FT_ENOMEM, "out of memory");
    send_text(g->ranks[w], TAG_CAND, text);
    free(text);
    return FT_OK;
}

/* How long rank 0 waits for a worker's result with --candidate-timeout S: twice S and 5 s
 * (a worker's own alarm ends it after S of one candidate; the rest covers the messages), and
 * for its first result of a job SETUP_S more (the worker plans the job and measures its
 * machine's ceilings first). A rank that is stopped (SIGSTOP) or hung sends nothing: rank 0
 * ends the job. */
enum { SETUP_S = 120 };
static double candidate_limit_s;

void ft_cli_mpi_result_timeout(double candidate_timeout_s) {
    candidate_limit_s = candidate_timeout_s > 0 ? candidate_timeout_s : 0;
}

static ft_status w_recv(void *ctx, int w, json_t **events, ft_err *err) {
    group *g = ctx;
    *events = NULL;
    double limit =
        candidate_limit_s > 0 ? 2 * candidate_limit_s + 5 + (g->answered[w] ? 0 : SETUP_S) : 0;
    char *text = recv_text(g->ranks[w], TAG_RESULT, NULL, limit);
    if (!text)
        return ft_err_set(err, FT_EIO,
                          "rank %d sent no result within %.0f s (--candidate-timeout %g: twice "
                          "that and 5 s%s): it is stopped or hung; ending the job (the log keeps "
                          "what was measured; the same command resumes)",
                          g->ranks[w], limit, candidate_limit_s,
                          g->answered[w] ? "" : ", and 2 minutes for its start");
    g->answered[w] = 1;
    json_error_t je;
    *events = json_loads(text, 0, &je);
    free(text);
    if (!json_is_array(*events))
        return ft_err_set(err, FT_EFORMAT, "rank %d sent a malformed result: %s", g->ranks[w],
                          je.text);
    return FT_OK;
}

int ft_cli_mpi_groups(int njobs) {
    if (size < 2 || rank) return 1;
    ngroups = njobs < size ? njobs : size;
    if (ngroups < 1) ngroups = 1;
    memset(groups, 0, sizeof groups);
    for (int g = 0; g < ngroups; g++) {
        groups[g].w.ctx = &groups[g];
        groups[g].w.send = w_send;
        groups[g].w.recv = w_recv;
        groups[g].w.self = g == 0; /* rank 0 measures in its own group only */
    }
    for (int r = 1; r < size; r++) {
        group *g = &groups[r % ngroups];
        g->ranks[g->w.n++] = r;
    }
    return ngroups;
}

const ft_tune_workers *ft_cli_mpi_workers(int g, int job) {
    if (size < 2 || rank || g < 0 || g >= ngroups) return NULL;
    if (groups[g].job != job) memset(groups[g].answered, 0, sizeof groups[g].answered);
    groups[g].job = job;
    return &groups[g].w;
}

void ft_cli_mpi_session_done(int g) {
    if (size < 2 || rank || g < 0 || g >= ngroups) return;
    for (int w = 0; w < groups[g].w.n; w++)
        send_text(groups[g].ranks[w], TAG_JOBEND, "");
}

void ft_cli_mpi_all_done(void) {
    if (size < 2 || rank) return;
    for (int r = 1; r < size; r++)
        send_text(r, TAG_ALLDONE, "");
}

/* ---- the other ranks ------------------------------------------------------------------------ */

/* The message a worker has read but not yet used (the first candidate of a job). */
static json_t *held;

int ft_cli_mpi_next_job(void) {
    if (!held) {
        for (;;) {
            int tag;
            char *text = recv_text(0, MPI_ANY_TAG, &tag, 0);
            if (tag == TAG_ALLDONE) {
                free(text);
                return -1;
            }
            if (tag == TAG_JOBEND) { /* a job whose session needed no evaluation here */
                free(text);
                continue;
            }
            held = json_loads(text, 0, NULL);
            free(text);
            if (json_is_object(held)) break;
            json_decref(held);
            held = NULL;
        }
    }
    return (int)json_integer_value(json_object_get(held, "job"));
}

static int s_next(void *ctx, json_t **config, double *best, ft_err *err) {
    (void)ctx;
    (void)err;
    if (!held) {
        int tag;
        char *text = recv_text(0, MPI_ANY_TAG, &tag, 0);
        if (tag != TAG_CAND) {
            free(text);
            if (tag == TAG_ALLDONE) MPI_Abort(MPI_COMM_WORLD, 1); /* cannot happen mid-job */
            return 0;
        }
        held = json_loads(text, 0, NULL);
        free(text);
    }
    json_t *m = held;
    held = NULL;
    if (!json_is_object(m)) {
        json_decref(m);
        ft_err_set(err, FT_EFORMAT, "rank 0 sent a malformed candidate");
        return -1;
    }
    *config = json_incref(json_object_get(m, "config"));
    double b = json_number_value(json_object_get(m, "best"));
    *best = b > 0 ? b : INFINITY;
    json_decref(m);
    return 1;
}

static ft_status s_reply(void *ctx, json_t *events, ft_err *err) {
    (void)ctx;
    char *text = json_dumps(events, JSON_COMPACT);
    if (!text) return ft_err_set(err, FT_ENOMEM, "out of memory");
    send_text(0, TAG_RESULT, text);
    free(text);
    return FT_OK;
}

static const ft_tune_server server = {NULL, s_next, s_reply};

const ft_tune_server *ft_cli_mpi_server(void) { return rank ? &server : NULL; }

/* The first line where two different keys differ: each side's text of it (at most n bytes;
 * "nothing" past a key's end). */
static void first_difference(const char *a, const char *b, char *da, char *db, size_t n) {
    for (;;) {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        if (la != lb || strncmp(a, b, la) != 0 || !*a || !*b) {
            snprintf(da, n, "%.*s", (int)(*a ? la : 7), *a ? a : "nothing");
            snprintf(db, n, "%.*s", (int)(*b ? lb : 7), *b ? b : "nothing");
            return;
        }
        a += la + (a[la] == '\n');
        b += lb + (b[lb] == '\n');
    }
}

int ft_cli_mpi_same_run(const char *key, char *why, size_t n) {
    enum { WHY = 1024 };
    char msg[WHY] = "";
    why[0] = '\0';
    if (size < 2) return 1;
    int len = (int)strlen(key) + 1, *lens = NULL, *displs = NULL, *worlds = NULL;
    char *all = NULL;
    if (!rank) {
        lens = calloc((size_t)size, sizeof *lens);
        displs = calloc((size_t)size, sizeof *displs);
        worlds = calloc((size_t)size, sizeof *worlds);
        if (!lens || !displs || !worlds) MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, comm);
    MPI_Gather(&world_rank, 1, MPI_INT, worlds, 1, MPI_INT, 0, comm);
    if (!rank) {
        size_t total = 0;
        for (int r = 0; r < size; r++) {
            displs[r] = (int)total;
            total += (size_t)lens[r];
        }
        all = malloc(total);
        if (!all) MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Gatherv(key, len, MPI_CHAR, all, lens, displs, MPI_CHAR, 0, comm);
    for (int r = 1; !rank && r < size && !msg[0]; r++) {
        const char *theirs = all + displs[r];
        if (!strcmp(theirs, key)) continue;
        char mine[400], other[400];
        first_difference(key, theirs, mine, other, sizeof mine);
        /* "job 0 (fusion.dflare) sizes: N=4800 ..., where rank 0 has N=48 ...": the shared
         * label once. */
        const char *colon = strstr(mine, ": ");
        size_t label = colon ? (size_t)(colon - mine) + 2 : 0;
        const char *ours = label && !strncmp(mine, other, label) ? mine + label : mine;
        snprintf(msg, sizeof msg,
                 "rank %d was started with another run than rank %d: %s, where rank %d has %s "
                 "(every rank needs the same ops, sizes, attributes, measurement and kernel "
                 "sources: the same command line and FLARETUNE_MAX_LOST); nothing was run",
                 worlds[r], world_rank, other, world_rank, ours);
    }
    free(lens);
    free(displs);
    free(worlds);
    free(all);
    MPI_Bcast(msg, WHY, MPI_CHAR, 0, comm);
    snprintf(why, n, "%s", msg);
    return !msg[0];
}

/* Every rank's device, then one group of ranks per kind (in order of first appearance). */
int ft_cli_mpi_split_by_device(const char *device, int *kind) {
    *kind = 0;
    if (world_size < 2) return 1;
    enum { LEN = 256 };
    char mine[LEN] = {0};
    snprintf(mine, sizeof mine, "%s", device);
    char *all = calloc((size_t)world_size, LEN);
    if (!all) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Allgather(mine, LEN, MPI_CHAR, all, LEN, MPI_CHAR, MPI_COMM_WORLD);
    /* kind of rank r: the index of its device among the distinct ones, by first rank */
    int kinds = 0, my_kind = 0;
    int *first = malloc(sizeof(int) * (size_t)world_size);
    if (!first) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int r = 0; r < world_size; r++) {
        int k = 0;
        while (k < kinds && strcmp(all + (size_t)first[k] * LEN, all + (size_t)r * LEN)) k++;
        if (k == kinds) first[kinds++] = r;
        if (r == world_rank) my_kind = k;
    }
    free(first);
    free(all);
    if (kinds > 1) {
        MPI_Comm_split(MPI_COMM_WORLD, my_kind, world_rank, &comm);
        MPI_Comm_rank(comm, &rank);
        MPI_Comm_size(comm, &size);
    }
    *kind = my_kind;
    return kinds;
}
#else
int ft_cli_mpi_rank(void) { return 0; }
int ft_cli_mpi_size(void) { return 1; }
int ft_cli_mpi_start(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    return 0;
}
void ft_cli_mpi_end(int failed) { (void)failed; }
int ft_cli_mpi_groups(int njobs) {
    (void)njobs;
    return 1;
}
const ft_tune_workers *ft_cli_mpi_workers(int g, int job) {
    (void)g;
    (void)job;
    return NULL;
}
void ft_cli_mpi_session_done(int g) { (void)g; }
void ft_cli_mpi_all_done(void) {}
int ft_cli_mpi_next_job(void) { return -1; }
const ft_tune_server *ft_cli_mpi_server(void) { return NULL; }
int ft_cli_mpi_split_by_device(const char *device, int *kind) {
    (void)device;
    *kind = 0;
    return 1;
}
int ft_cli_mpi_world_rank(void) { return 0; }
void ft_cli_mpi_result_timeout(double candidate_timeout_s) { (void)candidate_timeout_s; }
int ft_cli_mpi_same_run(const char *key, char *why, size_t n) {
    (void)key;
    if (n) why[0] = '\0';
    return 1;
}
#endif

int ft_cli_launched_ranks(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                                       "SLURM_STEP_NUM_TASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long n = v ? strtol(v, &end, 10) : 0;
        if (v && end != v && n > 1) return n > INT_MAX ? INT_MAX : (int)n;
    }
    return 1;
}
