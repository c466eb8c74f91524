/* nvtx.c: the "flaretune" NVTX domain and its ranges (see traces/nvtx.h).
 *
 * NVTX v3 is header-only: the first call looks for a tool (NVTX_INJECTION64_PATH, which Nsight
 * sets) and without one every later call returns at once. The domain is created once per
 * process. Without the CUDA toolkit (FT_HAVE_CUDA 0) the ranges are no-ops and only the color
 * function remains.
 */
#include "traces/nvtx.h"

#include <stddef.h>

#if FT_HAVE_CUDA
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#endif

/* Distinct, readable colors on Nsight's dark and light themes. */
static const uint32_t palette[] = {
    0xFF4E79A7, 0xFFF28E2B, 0xFFE15759, 0xFF76B7B2, 0xFF59A14F,
    0xFFEDC948, 0xFFB07AA1, 0xFFFF9DA7, 0xFF9C755F, 0xFF86BCB6,
};
#define NEUTRAL 0xFFBAB0AC

uint32_t ft_nvtx_color(const char *op) {
    if (!op || !*op) return NEUTRAL;
    uint32_t h = 2166136261u; /* FNV-1a: stable across runs and builds */
    for (const unsigned char *p = (const unsigned char *)op; *p; p++)
        h = (h ^ *p) * 16777619u;
    return palette[h % (sizeof palette / sizeof palette[0])];
}

#if FT_HAVE_CUDA

static nvtxDomainHandle_t domain;
static pthread_once_t domain_once = PTHREAD_ONCE_INIT;

static void domain_create(void) { domain = nvtxDomainCreateA("flaretune"); }

void ft_nvtx_push(const char *name, const char *op, uint64_t payload) {
    pthread_once(&domain_once, domain_create);
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = ft_nvtx_color(op);
    a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a.payload.ullValue = payload;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name ? name : "";
    nvtxDomainRangePushEx(domain, &a);
}

void ft_nvtx_pop(void) {
    pthread_once(&domain_once, domain_create);
    nvtxDomainRangePop(domain);
}

#else

void ft_nvtx_push(const char *name, const char *op, uint64_t payload) {
    (void)name;
    (void)op;
    (void)payload;
}

void ft_nvtx_pop(void) {}

#endif
