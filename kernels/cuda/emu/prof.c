/* prof.c: warp-level requests rebuilt from the emulated threads' accesses (see prof.h).
 *
 * The threads of a block run one after another between barriers, so the lanes of a request
 * arrive far apart: lane 0 may make all its accesses of a phase before lane 1 makes its first.
 * Each (warp, instruction address, kind) has a slot holding one pending request per occurrence:
 * lane l's k-th access at that address fills request k of the slot. When the block passes a
 * barrier or ends, every pending request is complete; its figures are added to the launch's
 * totals and to its site, and the slots are emptied for the next phase.
 */
#include "prof.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SECTOR_SHIFT 5 /* 32-byte sectors */
#define LINE_SHIFT 7   /* 128-byte lines   */
#define BANKS        32

const char *ft_emu_acc_name(ft_emu_acc k) {
    static const char *const names[FT_EMU_NACC] = {"global load", "global store", "global atomic",
                                                   "shared load", "shared store"};
    return (unsigned)k < FT_EMU_NACC ? names[k] : "?";
}

const char *ft_emu_coll_class_name(int c) {
    static const char *const names[FT_EMU_NCOLL] = {"mma", "ldmatrix", "shuffle", "vote", "other"};
    return c >= 0 && c < FT_EMU_NCOLL ? names[c] : "?";
}

void ft_emu_launch_prof_free(ft_emu_launch_prof *p) {
    if (!p) return;
    free(p->sites);
    p->sites = NULL;
    p->nsites = 0;
}

/* ---- a sample of a grid ----------------------------------------------------------------------- */

uint64_t ft_emu_grid_interior(ft_emu_uint3 g) {
    uint64_t gx = g.x, gy = g.y;
    return (gx > 2 ? gx - 2 : 0) * (gy > 1 ? (gy > 2 ? gy - 2 : 0) : 1);
}

/* splitmix64: the interior's draws. */
static uint64_t sample_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* a[0..n) = 0..n-1, shuffled by draws from st (Fisher-Yates) unless st is NULL. */
static void deal(int *a, int n, uint64_t *st) {
    for (int j = 0; j < n; j++)
        a[j] = j;
    for (int j = n - 1; st && j > 0; j--) {
        int k = (int)(sample_next(st) % (uint64_t)(j + 1)), t = a[j];
        a[j] = a[k];
        a[k] = t;
    }
}

/* Spread a stratum's n (<= 64) blocks over the grid's z planes: the middles of n equal runs of
 * planes (all plane 0 when the grid has one). A plane can be another request of another length
 * (attention.decode's grid is splits x kv heads x requests), so a sample of the first plane
 * alone would stand for a different launch. With st, the runs are dealt to the blocks by a
 * permutation drawn from it: the blocks come in order along x or round the edges, and planes
 * dealt in that order would rise with x (a sample of splits x requests would see the late
 * splits of the late requests only). Without, the j-th block takes the j-th run. */
static void spread_z(ft_emu_uint3 *b, int n, unsigned gz, uint64_t *st) {
    int run[64];
    deal(run, n, st);
    for (int j = 0; j < n; j++)
        b[j].z = (unsigned)(((2 * (uint64_t)run[j] + 1) * (gz ? gz : 1)) / (2 * (uint64_t)n));
}

static void pick_xy(ft_emu_uint3 g, int want, uint64_t seed, ft_emu_uint3 *bnd, int *nb,
                    ft_emu_uint3 *inner, int *ni);

/* m blocks from the n places of b (x-y; n <= m <= n * gz, m <= 64): the places in turn, the
 * j-th in the j-th run of planes (a place's turns n picks apart are at least n * gz / m >= 1
 * planes apart, so no block is taken twice; each place's turns span the planes). */
static void repeat_over_planes(ft_emu_uint3 *b, int n, int m, unsigned gz) {
    for (int j = n; j < m; j++)
        b[j] = b[j % n];
    spread_z(b, m, gz, NULL);
}

void ft_emu_sample_pick(ft_emu_uint3 g, int want, uint64_t seed, ft_emu_uint3 *bnd, int *nb,
                        ft_emu_uint3 *inner, int *ni) {
    pick_xy(g, want, seed, bnd, nb, inner, ni);
    const unsigned gz = g.z ? g.z : 1;
    uint64_t st = seed ^ 0x2545f4914f6cdd1dull; /* the planes' own draws */
    const int missing = (want > 64 ? 64 : want) - (*nb + *ni);
    if (gz > 1 && missing > 0 && *nb > 0) {
        /* An x-y grid too small for the sample (a request's single block, times 24 requests):
         * the boundary's places are taken in several planes each, up to the sample's size. */
        uint64_t m = (uint64_t)(*nb + missing), room = (uint64_t)*nb * gz;
        const int take = (int)(m < room ? m : room);
        repeat_over_planes(bnd, *nb, take, gz);
        *nb = take;
    } else {
        spread_z(bnd, *nb, g.z, &st);
    }
    spread_z(inner, *ni, g.z, &st);
}

/* The sample's places in the x-y grid (z 0). */
static void pick_xy(ft_emu_uint3 g, int want, uint64_t seed, ft_emu_uint3 *bnd, int *nb,
                    ft_emu_uint3 *inner, int *ni) {
    *nb = *ni = 0;
    if (want > 64) want = 64;
    uint64_t gx = g.x, gy = g.y, inter = ft_emu_grid_interior(g);
    int wb = inter ? (want + 1) / 2 : want, wi;
    /* The boundary as one walk (the top row, down the right column, back along the bottom row
     * and up the left column: every place of a grid of two rows or two columns; a grid of one
     * row or column is walked along), sampled at the middles of equal runs: each block stands
     * for as many places as any other, as the stratum's scale assumes, and the places spread
     * along every edge. */
    const uint64_t per = gy == 1 ? (gx > 2 ? 2 : gx) : gx == 1 ? gy : 2 * gx + 2 * gy - 4;
    const int nw = (uint64_t)wb < per ? wb : (int)per;
    for (int j = 0; j < nw; j++) {
        uint64_t k = (2 * (uint64_t)j + 1) * per / (2 * (uint64_t)nw), x, y;
        if (gy == 1) {
            x = gx > 2 && k ? gx - 1 : k, y = 0;
        } else if (gx == 1) {
            x = 0, y = k;
        } else if (k < gx) {
            x = k, y = 0;
        } else if (k < gx + gy - 1) {
            x = gx - 1, y = k - gx + 1;
        } else if (k < 2 * gx + gy - 2) {
            x = 2 * gx + gy - 3 - k, y = gy - 1;
        } else {
            x = 0, y = 2 * gx + 2 * gy - 4 - k;
        }
        bnd[(*nb)++] = (ft_emu_uint3){(unsigned)x, (unsigned)y, 0};
    }
    uint64_t st = seed;
    if (!inter) return;
    wi = want - *nb; /* the interior takes what the boundary could not */
    if ((uint64_t)wi > inter) wi = (int)inter;
    uint64_t ix = gx - 2, iy = gy > 2 ? gy - 2 : 1;
    /* A Latin hypercube: the j-th place in the middle of the j-th of wi equal runs of the
     * interior's columns, and of its rows, the rows dealt to the columns by a permutation drawn
     * from the seed. Work that changes along x or y (attention.train's query blocks along x,
     * each attending to its own anchor's prefix) is then sampled evenly along it, where
     * independent draws may bunch. */
    int perm[64];
    deal(perm, wi, &st);
    for (int j = 0; j < wi; j++) {
        unsigned x = (unsigned)(1 + (2 * (uint64_t)j + 1) * ix / (2 * (uint64_t)wi));
        unsigned y =
            gy == 1 ? 0 : (unsigned)(1 + (2 * (uint64_t)perm[j] + 1) * iy / (2 * (uint64_t)wi));
        int dup = 0;
        for (int k = 0; k < *ni; k++)
            dup |= inner[k].x == x && inner[k].y == y;
        if (!dup) inner[(*ni)++] = (ft_emu_uint3){x, y, 0};
    }
    /* Places the hypercube gave twice (more places wanted than columns or rows): drawn. */
    for (int tries = 0; *ni < wi && (uint64_t)*ni < inter && tries < 64 * want; tries++) {
        uint64_t k = sample_next(&st) % inter;
        unsigned x = (unsigned)(1 + k % ix), y = gy == 1 ? 0 : (unsigned)(1 + k / ix);
        int dup = 0;
        for (int j = 0; j < *ni; j++) dup |= inner[j].x == x && inner[j].y == y;
        if (!dup) inner[(*ni)++] = (ft_emu_uint3){x, y, 0};
    }
}

static uint64_t scaled(uint64_t v, double f) { return (uint64_t)llround((double)v * f); }

void ft_emu_launch_prof_add_scaled(ft_emu_launch_prof *a, const ft_emu_launch_prof *p, double f) {
    for (int k = 0; k < FT_EMU_NACC; k++) {
        a->t[k].requests += scaled(p->t[k].requests, f);
        a->t[k].lanes += scaled(p->t[k].lanes, f);
        a->t[k].partial += scaled(p->t[k].partial, f);
        a->t[k].units += scaled(p->t[k].units, f);
        a->t[k].ideal += scaled(p->t[k].ideal, f);
        a->t[k].bytes += scaled(p->t[k].bytes, f);
        a->t[k].lines += scaled(p->t[k].lines, f);
    }
    for (int k = 0; k < FT_EMU_NCOLL; k++) a->coll[k] += scaled(p->coll[k], f);
    a->unique_read_bytes += scaled(p->unique_read_bytes, f);
    a->unique_write_bytes += scaled(p->unique_write_bytes, f);
    a->barriers += scaled(p->barriers, f);
    a->cp_async += scaled(p->cp_async, f);
    a->warps += scaled(p->warps, f);
}

/* ---- a set of sector numbers (open addressing; key 0 is empty, so keys are stored + 1) ------ */

typedef struct sector_set {
    uint64_t *keys;
    size_t cap, n;
} sector_set;

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int set_grow(sector_set *s) {
    size_t cap = s->cap ? s->cap * 2 : 4096;
    uint64_t *k = calloc(cap, sizeof *k);
    if (!k) return -1;
    for (size_t i = 0; i < s->cap; i++) {
        if (!s->keys[i]) continue;
        size_t j = mix64(s->keys[i]) & (cap - 1);
        while (k[j])
            j = (j + 1) & (cap - 1);
        k[j] = s->keys[i];
    }
    free(s->keys);
    s->keys = k;
    s->cap = cap;
    return 0;
}

static int set_add(sector_set *s, uint64_t sector) {
    if ((s->n + 1) * 2 > s->cap && set_grow(s) != 0) return -1;
    uint64_t key = sector + 1;
    size_t j = mix64(key) & (s->cap - 1);
    while (s->keys[j]) {
        if (s->keys[j] == key) return 0;
        j = (j + 1) & (s->cap - 1);
    }
    s->keys[j] = key;
    s->n++;
    return 0;
}

static void set_clear(sector_set *s) {
    if (s->keys) memset(s->keys, 0, s->cap * sizeof *s->keys);
    s->n = 0;
}

/* ---- the figures of one request ------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static size_t unique_u64(uint64_t *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_u64);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || v[m - 1] != v[i]) v[m++] = v[i];
    return m;
}

/* The distinct units of 2^shift bytes that n lanes' accesses of `size` bytes (1 to 32) touch. */
static uint64_t distinct_units(const uintptr_t *addr, int n, unsigned size, unsigned shift) {
    uint64_t unit[64];
    size_t nu = 0;
    for (int i = 0; i < n && i < 32; i++) {
        uint64_t a = addr[i], last = (a + size - 1) >> shift;
        for (uint64_t u = a >> shift; u <= last && nu < 64; u++)
            unit[nu++] = u;
    }
    return unique_u64(unit, nu);
}

void ft_emu_sectors(const uintptr_t *addr, int n, unsigned size, uint64_t *sectors,
                    uint64_t *ideal) {
    if (size == 0) size = 1;
    if (size > 32) size = 32;
    uint64_t start[32];
    for (int i = 0; i < n && i < 32; i++)
        start[i] = addr[i];
    *sectors = distinct_units(addr, n, size, SECTOR_SHIFT);
    /* The distinct bytes: the union of [a, a + size), in whole sectors. */
    size_t m = unique_u64(start, (size_t)(n < 32 ? n : 32));
    uint64_t bytes = 0, end = 0;
    for (size_t i = 0; i < m; i++) {
        uint64_t lo = start[i] > end ? start[i] : end, hi = start[i] + size;
        if (hi > lo) bytes += hi - lo;
        if (hi > end) end = hi;
    }
    *ideal = (bytes + 31) >> SECTOR_SHIFT;
}

uint64_t ft_emu_lines(const uintptr_t *addr, int n, unsigned size) {
    if (size == 0) size = 1;
    if (size > 32) size = 32;
    return distinct_units(addr, n, size, LINE_SHIFT);
}

void ft_emu_wavefronts(const uintptr_t *addr, const unsigned *lane, int n, unsigned size,
                       uint64_t *wavefronts, uint64_t *ideal) {
    if (size == 0) size = 1;
    if (size > 16) size = 16;
    unsigned width = size <= 4 ? 32 : size == 8 ? 16 : 8; /* lanes per phase */
    *wavefronts = 0, *ideal = 0;
    for (unsigned phase = 0; phase < 32 / width; phase++) {
        uint64_t words[128];
        size_t nw = 0;
        for (int i = 0; i < n; i++) {
            if (lane[i] / width != phase) continue;
            uint64_t a = addr[i];
            for (uint64_t w = a >> 2; w <= (a + size - 1) >> 2 && nw < 128; w++)
                words[nw++] = w;
        }
        if (nw == 0) continue;
        nw = unique_u64(words, nw);
        unsigned per_bank[BANKS] = {0}, most = 0;
        for (size_t i = 0; i < nw; i++) {
            unsigned b = (unsigned)(words[i] % BANKS);
            if (++per_bank[b] > most) most = per_bank[b];
        }
        *wavefronts += most;
        *ideal += 1;
    }
}

/* ---- collecting ------------------------------------------------------------------------------ */

typedef struct request {
    uintptr_t addr[32];
    uint32_t mask;
} request;

typedef struct slot {
    unsigned warp;
    uintptr_t pc;
    ft_emu_acc kind;
    unsigned flags, size;
    uint32_t count[32]; /* occurrences so far of each lane in this phase */
    request *req;
    uint32_t nreq, capreq;
} slot;

typedef struct index_map { /* (key) -> index + 1, open addressing */
    uint64_t *key;
    uint32_t *val;
    size_t cap, n;
} index_map;

struct ft_emu_prof {
    ft_emu_launch_prof rec;
    int failed; /* memory ran out: the record is incomplete */
    unsigned exist[FT_EMU_MAX_WARPS];
    slot *slots;
    uint32_t nslots, capslots;
    index_map slot_of; /* (warp, pc, kind) -> slot */
    index_map site_of; /* (pc, kind) -> site */
    int capsites;
    sector_set read, written;
};

/* Exact keys: user-space addresses fit in 56 bits, warps in 5, kinds in 3. */
static uint64_t slot_key(unsigned warp, uintptr_t pc, ft_emu_acc kind) {
    return ((uint64_t)pc << 8) | ((uint64_t)(warp & 31) << 3) | (uint64_t)kind;
}
static uint64_t site_key(uintptr_t pc, ft_emu_acc kind) { return ((uint64_t)pc << 3) | kind; }

/* Find key's value (0: absent) or insert val for it. */
static uint32_t map_get(const index_map *m, uint64_t key) {
    if (!m->cap) return 0;
    size_t j = mix64(key) & (m->cap - 1);
    while (m->val[j]) {
        if (m->key[j] == key) return m->val[j];
        j = (j + 1) & (m->cap - 1);
    }
    return 0;
}

static int map_put(index_map *m, uint64_t key, uint32_t val) {
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 256;
        uint64_t *k = calloc(cap, sizeof *k);
        uint32_t *v = calloc(cap, sizeof *v);
        if (!k || !v) {
            free(k), free(v);
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->val[i]) continue;
            size_t j = mix64(m->key[i]) & (cap - 1);
            while (v[j])
                j = (j + 1) & (cap - 1);
            k[j] = m->key[i], v[j] = m->val[i];
        }
        free(m->key), free(m->val);
        m->key = k, m->val = v, m->cap = cap;
    }
    size_t j = mix64(key) & (m->cap - 1);
    while (m->val[j])
        j = (j + 1) & (m->cap - 1);
    m->key[j] = key, m->val[j] = val;
    m->n++;
    return 0;
}

static void map_free(index_map *m) {
    free(m->key), free(m->val);
    memset(m, 0, sizeof *m);
}

ft_emu_prof *ft_emu_prof_new(void) { return calloc(1, sizeof(ft_emu_prof)); }

static void reset_slots(ft_emu_prof *p) {
    for (uint32_t i = 0; i < p->nslots; i++)
        free(p->slots[i].req);
    free(p->slots);
    p->slots = NULL;
    p->nslots = p->capslots = 0;
    map_free(&p->slot_of);
}

void ft_emu_prof_free(ft_emu_prof *p) {
    if (!p) return;
    reset_slots(p);
    map_free(&p->site_of);
    ft_emu_launch_prof_free(&p->rec);
    free(p->read.keys);
    free(p->written.keys);
    free(p);
}

int ft_emu_prof_begin(ft_emu_prof *p, const char *kernel, ft_emu_uint3 grid, ft_emu_uint3 block) {
    reset_slots(p);
    map_free(&p->site_of);
    ft_emu_launch_prof_free(&p->rec);
    set_clear(&p->read);
    set_clear(&p->written);
    memset(&p->rec, 0, sizeof p->rec);
    p->capsites = 0;
    p->failed = 0;
    snprintf(p->rec.kernel, sizeof p->rec.kernel, "%s", kernel ? kernel : "?");
    p->rec.grid = grid, p->rec.block = block;
    return 0;
}

void ft_emu_prof_block(ft_emu_prof *p, const unsigned *exist, unsigned nwarps) {
    memset(p->exist, 0, sizeof p->exist);
    for (unsigned w = 0; w < nwarps && w < FT_EMU_MAX_WARPS; w++)
        p->exist[w] = exist[w];
    p->rec.blocks++;
    p->rec.warps += nwarps;
}

static slot *slot_for(ft_emu_prof *p, unsigned warp, uintptr_t pc, ft_emu_acc kind) {
    uint64_t key = slot_key(warp, pc, kind);
    uint32_t v = map_get(&p->slot_of, key);
    if (v) return &p->slots[v - 1];
    if (p->nslots == p->capslots) {
        uint32_t cap = p->capslots ? p->capslots * 2 : 64;
        slot *s = realloc(p->slots, cap * sizeof *s);
        if (!s) return NULL;
        p->slots = s, p->capslots = cap;
    }
    slot *s = &p->slots[p->nslots];
    memset(s, 0, sizeof *s);
    s->warp = warp, s->pc = pc, s->kind = kind;
    if (map_put(&p->slot_of, key, p->nslots + 1) != 0) return NULL;
    p->nslots++;
    return s;
}

int ft_emu_prof_access(ft_emu_prof *p, unsigned warp, unsigned lane, uintptr_t pc, uintptr_t addr,
                       unsigned size, ft_emu_acc kind, unsigned flags) {
    if (p->failed) return -1;
    slot *s = slot_for(p, warp, pc, kind);
    if (!s) return p->failed = 1, -1;
    uint32_t k = s->count[lane & 31]++;
    if (k >= s->capreq) {
        uint32_t cap = s->capreq ? s->capreq * 2 : 8;
        while (cap <= k)
            cap *= 2;
        request *r = realloc(s->req, (size_t)cap * sizeof *r);
        if (!r) return p->failed = 1, -1;
        s->req = r, s->capreq = cap;
    }
    while (s->nreq <= k)
        s->req[s->nreq++].mask = 0;
    s->req[k].addr[lane & 31] = addr;
    s->req[k].mask |= 1u << (lane & 31);
    s->flags |= flags;
    if (size > s->size) s->size = size;
    return 0;
}

/* The launch's site for (pc, kind), made on first use; NULL when memory ran out. */
static ft_emu_site *site_for(ft_emu_prof *p, uintptr_t pc, ft_emu_acc kind) {
    uint64_t key = site_key(pc, kind);
    uint32_t v = map_get(&p->site_of, key);
    if (v) return &p->rec.sites[v - 1];
    if (p->rec.nsites == p->capsites) {
        int cap = p->capsites ? p->capsites * 2 : 32;
        ft_emu_site *s = realloc(p->rec.sites, (size_t)cap * sizeof *s);
        if (!s) return NULL;
        p->rec.sites = s, p->capsites = cap;
    }
    ft_emu_site *s = &p->rec.sites[p->rec.nsites];
    memset(s, 0, sizeof *s);
    s->pc = pc, s->kind = kind;
    if (map_put(&p->site_of, key, (uint32_t)p->rec.nsites + 1) != 0) return NULL;
    p->rec.nsites++;
    return s;
}

static void add_traffic(ft_emu_traffic *t, uint64_t lanes, int partial, uint64_t units,
                        uint64_t ideal, uint64_t bytes, uint64_t lines) {
    t->requests++;
    t->lines += lines;
    t->lanes += lanes;
    t->partial += partial != 0;
    t->units += units;
    t->ideal += ideal;
    t->bytes += bytes;
}

/* One complete request of slot s: its figures, into the launch and the site. */
static int close_request(ft_emu_prof *p, const slot *s, const request *r) {
    uintptr_t addr[32];
    unsigned lane[32];
    int n = 0;
    for (unsigned l = 0; l < 32; l++)
        if (r->mask >> l & 1u) addr[n] = r->addr[l], lane[n] = l, n++;
    if (n == 0) return 0;
    uint64_t units, ideal, lines = 0;
    int global = s->kind == FT_EMU_GLD || s->kind == FT_EMU_GST || s->kind == FT_EMU_GATOM;
    if (global) {
        ft_emu_sectors(addr, n, s->size, &units, &ideal);
        lines = ft_emu_lines(addr, n, s->size);
        for (int i = 0; i < n; i++) {
            uint64_t last = (addr[i] + (s->size ? s->size : 1) - 1) >> SECTOR_SHIFT;
            for (uint64_t sec = addr[i] >> SECTOR_SHIFT; sec <= last; sec++) {
                if (s->kind != FT_EMU_GST && set_add(&p->read, sec) != 0) return -1;
                if (s->kind != FT_EMU_GLD && set_add(&p->written, sec) != 0) return -1;
            }
        }
        if (s->flags & FT_EMU_ACCESS_ASYNC) p->rec.cp_async++;
    } else {
        ft_emu_wavefronts(addr, lane, n, s->size, &units, &ideal);
    }
    int partial = r->mask != p->exist[s->warp % FT_EMU_MAX_WARPS];
    uint64_t bytes = (uint64_t)n * s->size;
    add_traffic(&p->rec.t[s->kind], (uint64_t)n, partial, units, ideal, bytes, lines);
    ft_emu_site *site = site_for(p, s->pc, s->kind);
    if (!site) return -1;
    add_traffic(&site->t, (uint64_t)n, partial, units, ideal, bytes, lines);
    site->flags |= s->flags;
    if (s->size > site->size) site->size = s->size;
    return 0;
}

void ft_emu_prof_sync(ft_emu_prof *p, int barrier) {
    if (barrier) p->rec.barriers++;
    for (uint32_t i = 0; i < p->nslots && !p->failed; i++) {
        slot *s = &p->slots[i];
        for (uint32_t k = 0; k < s->nreq; k++)
            if (close_request(p, s, &s->req[k]) != 0) {
                p->failed = 1;
                break;
            }
        s->nreq = 0;
        s->flags = 0;
        memset(s->count, 0, sizeof s->count);
    }
}

void ft_emu_prof_collective(ft_emu_prof *p, const char *name) {
    int c = strncmp(name, "mma", 3) == 0        ? FT_EMU_COLL_MMA
            : strncmp(name, "ldmatrix", 8) == 0 ? FT_EMU_COLL_LDMATRIX
            : strncmp(name, "__shfl", 6) == 0   ? FT_EMU_COLL_SHUFFLE
            : strncmp(name, "__ballot", 8) == 0 || strncmp(name, "__any", 5) == 0 ||
                    strncmp(name, "__all", 5) == 0 || strncmp(name, "__match", 7) == 0
                ? FT_EMU_COLL_VOTE
                : FT_EMU_COLL_OTHER;
    p->rec.coll[c]++;
}

static int cmp_site(const void *a, const void *b) {
    const ft_emu_site *x = a, *y = b;
    if (x->kind != y->kind) return (int)x->kind - (int)y->kind;
    if (x->t.units != y->t.units) return x->t.units < y->t.units ? 1 : -1;
    return (x->pc > y->pc) - (x->pc < y->pc);
}

uint64_t ft_emu_prof_extents(const ft_emu_prof *p, int written, const ft_emu_extent *ext, int n,
                             uint64_t *sectors) {
    const sector_set *s = written ? &p->written : &p->read;
    uint64_t outside = 0;
    for (size_t i = 0; i < s->cap; i++) {
        if (!s->keys[i]) continue;
        uintptr_t a = (uintptr_t)((s->keys[i] - 1) << SECTOR_SHIFT);
        int lo = 0, hi = n - 1, at = -1;
        while (lo <= hi) { /* the last extent starting at or before the sector's end */
            int mid = (lo + hi) / 2;
            if (ext[mid].start < a + (1u << SECTOR_SHIFT))
                at = mid, lo = mid + 1;
            else
                hi = mid - 1;
        }
        if (at >= 0 && a < ext[at].start + ext[at].bytes)
            sectors[at]++;
        else
            outside += 1u << SECTOR_SHIFT;
    }
    return outside;
}

int ft_emu_prof_end(ft_emu_prof *p, ft_emu_launch_prof *out) {
    ft_emu_prof_sync(p, 0);
    p->rec.unique_read_bytes = (uint64_t)p->read.n << SECTOR_SHIFT;
    p->rec.unique_write_bytes = (uint64_t)p->written.n << SECTOR_SHIFT;
    if (p->rec.nsites > 1)
        qsort(p->rec.sites, (size_t)p->rec.nsites, sizeof *p->rec.sites, cmp_site);
    *out = p->rec;
    memset(&p->rec, 0, sizeof p->rec);
    p->capsites = 0;
    map_free(&p->site_of);
    return p->failed ? -1 : 0;
}
