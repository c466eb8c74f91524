/* preset.c: problem presets: the target models of SPEC.md crossed with the two drafter
 * architectures and the two phases, plus `tiny` presets small enough for the float64 reference
 * and for CI. Names are MODEL.ARCH.PHASE, e.g. qwen3-8b.dflare.decode or tiny.dflash.train. */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op/op.h"

/* The targets' RoPE scalings, from each model's public config.json (rope_scaling): Llama 3.1
 * (meta-llama/Llama-3.1-8B: rope_type llama3, factor 8, low_freq_factor 1, high_freq_factor 4,
 * original_max_position_embeddings 8192) and gpt-oss (openai/gpt-oss-20b: rope_type yarn, factor
 * 32, beta_fast 32, beta_slow 1, original_max_position_embeddings 4096, truncate false).
 * Parameters a scaling does not use keep their defaults (make() fills them). */
static const ft_rope_attrs llama31_rope = {.scaling = FT_ROPE_LLAMA3,
                                           .factor = 8,
                                           .low_freq_factor = 1,
                                           .high_freq_factor = 4,
                                           .original_max_pos = 8192};
static const ft_rope_attrs gpt_oss_rope = {.scaling = FT_ROPE_YARN,
                                           .factor = 32,
                                           .original_max_pos = 4096,
                                           .beta_fast = 32,
                                           .beta_slow = 1,
                                           .truncate = 0};

typedef struct {
    const char *name;
    int64_t H, Hq, Hkv, dh, V, layers, I;
    double rope_theta;
    const ft_rope_attrs *rope; /* NULL: no scaling */
} model_shape;

static const model_shape models[] = {
    /* I: the MLP's intermediate size, as in each model's public config (SPEC.md); a draft layer
     * is one of the target's decoder layers, so it has the target's I, and rotates its keys as
     * the target does: each config.json's rope_theta (Qwen3 1e6, gpt-oss 1.5e5, Llama 3.1 5e5)
     * and rope_scaling. */
    {"qwen3-4b", 2560, 32, 8, 128, 151936, 36, 9728, 1e6, NULL},
    {"qwen3-8b", 4096, 32, 8, 128, 151936, 36, 12288, 1e6, NULL},
    {"gpt-oss-20b", 2880, 64, 8, 64, 201088, 24, 2880, 150000, &gpt_oss_rope},
    {"llama3.1-8b", 4096, 32, 8, 128, 128256, 32, 14336, 500000, &llama31_rope},
    {"small", 1024, 16, 4, 64, 32768, 24, 3072, 1e6, NULL},
    {"tiny", 64, 4, 2, 16, 320, 8, 128, 1e6, NULL},
};
enum { NMODELS = sizeof models / sizeof models[0] };
static const char *const archs[] = {"dflash", "dflare"};
static const char *const phases[] = {"decode", "train"};
enum { NPRESETS = NMODELS * 2 * 2 };

/* Built once, on first use, from whichever thread comes first (the dashboard's and the tuner's
 * may both be the first): pthread_once makes the others wait for the finished table. */
static ft_preset table[NPRESETS];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void make(ft_preset *p, const model_shape *m, int arch, int phase) {
    int tiny = strcmp(m->name, "tiny") == 0, small = strcmp(m->name, "small") == 0;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s.%s.%s", m->name, archs[arch], phases[phase]);
    p->model = m->name;
    p->arch = archs[arch];
    p->phase = phases[phase];
    p->H = m->H;
    p->Hq = m->Hq;
    p->Hkv = m->Hkv;
    p->dh = m->dh;
    p->V = m->V;
    p->layers = m->layers;
    p->inter = m->I;
    /* Parameters a model's scaling does not use keep their defaults (what `list ops` shows). */
    p->rope_theta = m->rope_theta;
    ft_rope_default(&p->rope);
    const ft_rope_attrs *r = m->rope;
    if (r) p->rope.scaling = r->scaling;
    if (r && r->scaling == FT_ROPE_LLAMA3) {
        p->rope.factor = r->factor;
        p->rope.low_freq_factor = r->low_freq_factor;
        p->rope.high_freq_factor = r->high_freq_factor;
        p->rope.original_max_pos = r->original_max_pos;
    } else if (r && r->scaling == FT_ROPE_YARN) {
        p->rope.factor = r->factor;
        p->rope.original_max_pos = r->original_max_pos;
        p->rope.beta_fast = r->beta_fast;
        p->rope.beta_slow = r->beta_slow;
        p->rope.truncate = r->truncate;
    }
    /* Drafters (SPEC.md): dflash D 5 / T 5, dflare D 7 / T 9, block 16; gpt-oss drafters D 8,
     * T 5, block 8. */
    if (tiny) {
        p->D = arch ? 3 : 2;
        p->T = arch ? 4 : 3;
        p->B = 4;
    } else if (!strcmp(m->name, "gpt-oss-20b")) {
        p->D = 8;
        p->T = 5;
        p->B = 8;
    } else {
        p->D = arch ? 7 : 5;
        p->T = arch ? 9 : 5;
        p->B = 16;
    }
    /* Decode: R requests, each a block over an L-token context. Train: nseq sequences of S
     * context tokens with NB anchored blocks. `small` keeps real proportions at a size a
     * laptop-class CPU tunes in minutes. */
    p->R = tiny ? 3 : small ? 4 : 16;
    p->L = tiny ? 13 : small ? 1024 : 4096;
    p->nseq = tiny ? 2 : 1;
    p->S = tiny ? 24 : small ? 512 : 3072;
    p->NB = tiny ? 5 : small ? 32 : 512;
    /* Every draft layer full attention: the public DFlash drafter configs of these targets
     * (SpecForge configs/qwen3-4b-dflash.json, qwen3-8b-dflash.json) list only
     * "full_attention" layers. A sliding layout (`window`, `sliding`) is asked for with --set. */
    p->window = 0;
    p->sliding = 0;
    if (phase == 0) {
        p->ragged = tiny;
        p->N = p->R * p->B; /* the accepted tokens of one step are fused and projected */
        p->blocks = p->R;
    } else {
        p->N = p->nseq * p->S;
        p->blocks = p->nseq * p->NB;
    }
}

static void build_table(void) {
    int k = 0;
    for (int m = 0; m < NMODELS; m++)
        for (int a = 0; a < 2; a++)
            for (int ph = 0; ph < 2; ph++)
                make(&table[k++], &models[m], a, ph);
}

int ft_preset_count(void) { return NPRESETS; }

const ft_preset *ft_preset_at(int i) {
    pthread_once(&table_once, build_table);
    return i >= 0 && i < NPRESETS ? &table[i] : NULL;
}

const ft_preset *ft_preset_find(const char *name) {
    pthread_once(&table_once, build_table);
    for (int i = 0; i < NPRESETS; i++)
        if (strcmp(table[i].name, name) == 0) return &table[i];
    return NULL;
}

const char *const ft_preset_fields[] = {"H",      "Hq",   "Hkv", "dh", "V",      "I",
                                        "D",      "T",    "B",   "N",  "R",      "L",
                                        "ragged", "nseq", "S",   "NB", "blocks", "window",
                                        "sliding", NULL};

int64_t *ft_preset_field(ft_preset *p, const char *name) {
    static const struct {
        const char *name;
        size_t off;
    } f[] = {
        {"H", offsetof(ft_preset, H)},           {"Hq", offsetof(ft_preset, Hq)},
        {"Hkv", offsetof(ft_preset, Hkv)},       {"dh", offsetof(ft_preset, dh)},
        {"V", offsetof(ft_preset, V)},           {"I", offsetof(ft_preset, inter)},
        {"D", offsetof(ft_preset, D)},           {"T", offsetof(ft_preset, T)},
        {"B", offsetof(ft_preset, B)},           {"N", offsetof(ft_preset, N)},
        {"R", offsetof(ft_preset, R)},           {"L", offsetof(ft_preset, L)},
        {"ragged", offsetof(ft_preset, ragged)}, {"nseq", offsetof(ft_preset, nseq)},
        {"S", offsetof(ft_preset, S)},           {"NB", offsetof(ft_preset, NB)},
        {"blocks", offsetof(ft_preset, blocks)}, {"window", offsetof(ft_preset, window)},
        {"sliding", offsetof(ft_preset, sliding)},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (strcmp(f[i].name, name) == 0) return (int64_t *)((char *)p + f[i].off);
    return NULL;
}

int64_t ft_preset_size(const ft_preset *p, const char *name) {
    const int64_t *v = ft_preset_field((ft_preset *)p, name); /* read, never written */
    return v ? *v : -1;
}

ft_status ft_preset_set(ft_preset *p, const char *assignment, ft_err *err) {
    const char *eq = strchr(assignment, '=');
    char name[32];
    if (!eq || eq == assignment || (size_t)(eq - assignment) >= sizeof name)
        return ft_err_set(err, FT_EINVAL, "--set expects NAME=VALUE, got '%s'", assignment);
    memcpy(name, assignment, (size_t)(eq - assignment));
    name[eq - assignment] = '\0';
    int64_t *slot = ft_preset_field(p, name);
    if (!slot && strcmp(name, "M") == 0) {
        /* `list presets` shows M, the loss's rows, but a preset keeps blocks of B rows: say what
         * to set instead of calling M unknown. */
        char *end;
        errno = 0;
        long long m = strtoll(eq + 1, &end, 10);
        if (end != eq + 1 && !*end && !errno && m > 0 && m % p->B == 0)
            return ft_err_set(err, FT_EINVAL,
                              "size M is derived: M = blocks * B (the loss's rows, B = %lld "
                              "here); for M = %lld set blocks=%lld instead",
                              (long long)p->B, m, m / p->B);
        return ft_err_set(err, FT_EINVAL,
                          "size M is derived: M = blocks * B (the loss's rows, B = %lld here); "
                          "set blocks=... (and B=...) instead",
                          (long long)p->B);
    }
    if (!slot) {
        char known[160];
        size_t k = 0;
        for (int i = 0; ft_preset_fields[i]; i++)
            k += (size_t)snprintf(known + k, sizeof known - k, "%s%s", i ? ", " : "",
                                  ft_preset_fields[i]);
        return ft_err_set(err, FT_EINVAL, "unknown size '%s' (sizes: %s)", name, known);
    }
    char *end;
    errno = 0;
    long long v = strtoll(eq + 1, &end, 10);
    int is_ragged = strcmp(name, "ragged") == 0;
    /* window = 0 (full attention) and sliding = 0 (every layer) are the defaults */
    int zero_ok = is_ragged || !strcmp(name, "window") || !strcmp(name, "sliding");
    /* digits only: strtoll's leading blanks and sign would let "+64" and " 64" name a preset
     * "+H=+64" that differs from "+H=64" but runs the same sizes */
    if (!isdigit((unsigned char)eq[1]) || end == eq + 1 || *end || errno || v < (zero_ok ? 0 : 1) ||
        (is_ragged && v > 1) || v >= (1LL << 31))
        return ft_err_set(err, FT_EINVAL, "size %s: '%s' is not %s", name, eq + 1,
                          is_ragged  ? "0 or 1"
                          : zero_ok ? "an integer from 0 to 2^31 - 1"
                                    : "a positive integer below 2^31");
    *slot = v;
    /* Keep the derived sizes (rows per call, loss blocks) consistent with the phase unless the
     * user has fixed them explicitly. */
    if (!strcmp(name, "N")) p->user_set |= FT_PRESET_SET_N;
    if (!strcmp(name, "blocks")) p->user_set |= FT_PRESET_SET_BLOCKS;
    int decode = !strcmp(p->phase, "decode");
    if (!(p->user_set & FT_PRESET_SET_N)) p->N = decode ? p->R * p->B : p->nseq * p->S;
    if (!(p->user_set & FT_PRESET_SET_BLOCKS)) p->blocks = decode ? p->R : p->nseq * p->NB;
    snprintf(p->name + strlen(p->name), sizeof p->name - strlen(p->name), "+%s", assignment);
    return FT_OK;
}

ft_status ft_preset_check(const ft_preset *p, ft_err *err) {
    if (p->sliding == 0) return FT_OK;
    if (p->window <= 0)
        return ft_err_set(err, FT_EINVAL,
                          "sliding=%lld names sliding-window layers but window is 0 (full "
                          "attention): set window=W too",
                          (long long)p->sliding);
    if (p->D < 63 && (p->sliding >> p->D) != 0)
        return ft_err_set(err, FT_EINVAL,
                          "sliding=%lld marks a layer past the preset's D=%lld layers (bit i is "
                          "layer i, 0 to %lld)",
                          (long long)p->sliding, (long long)p->D, (long long)p->D - 1);
    return FT_OK;
}

int64_t ft_preset_layer_window(const ft_preset *p, int64_t i) {
    if (p->window <= 0) return 0;
    if (p->sliding == 0) return p->window;
    return i >= 0 && i < 63 && (p->sliding >> i) & 1 ? p->window : 0;
}

int64_t ft_preset_ctx_len(const ft_preset *p, int64_t r) {
    if (!p->ragged || p->R < 2) return p->L;
    /* Spread evenly over [0, 2L] so the mean stays L and one request has an empty context. */
    return 2 * p->L * r / (p->R - 1);
}

static int64_t gcd64(int64_t a, int64_t b) {
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

int64_t ft_preset_ctx_sum(const ft_preset *p) {
    if (p->R < 0 || p->L < 0 || (double)p->R * (2.0 * (double)p->L + 1.0) > (double)FT_MAX_NUMEL)
        return -1;
    if (!p->ragged || p->R < 2) return p->R * p->L;
    /* sum over r = 0..m of floor(a r / m), a = 2L, m = R - 1: with a = q m + k, the q r part
     * is q m (m + 1) / 2, and sum over r < m of floor(k r / m) is ((k - 1)(m - 1) + gcd(k, m)
     * - 1) / 2 (lattice points under a line), plus k at r = m. Equal to the loop it replaces. */
    int64_t a = 2 * p->L, m = p->R - 1, q = a / m, k = a % m;
    return q * m * (m + 1) / 2 + ((k - 1) * (m - 1) + gcd64(k, m) - 1) / 2 + k;
}
