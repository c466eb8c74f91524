/* op_ids.h: the size-symbol and tensor indices of every op (internal to kernels/).
 *
 * ft_call.dim[] and ft_call.t[] are indexed by these; they follow the order of each op's
 * description in kernels/op_<name>.c, which is the one place an op's interface is declared.
 * Kernels of every backend use them to unpack a call.
 */
#ifndef FT_KERNELS_OP_IDS_H
#define FT_KERNELS_OP_IDS_H

/* fusion.dflare (DL_*) and fusion.dflash (DH_*) */
enum { DL_N, DL_T, DL_H, DL_D };
enum { DL_X, DL_W, DL_G, DL_F, DL_DF, DL_DX, DL_DW, DL_DG };
enum { DH_N, DH_T, DH_H, DH_TH };
enum { DH_X, DH_WFC, DH_G, DH_F, DH_DF, DH_DX, DH_DWFC, DH_DG };
/* attention.kvproj (KP_*), attention.decode (DC_*), attention.train (TR_*) */
enum { KP_DC, KP_D, KP_N, KP_H, KP_KVD, KP_HKV, KP_DH };
enum { KP_C, KP_WK, KP_WV, KP_GK, KP_POS, KP_K, KP_V };
enum { DC_R, DC_B, DC_HQ, DC_HKV, DC_DH, DC_LSUM };
enum { DC_Q, DC_LENS, DC_KCTX, DC_VCTX, DC_KBLK, DC_VBLK, DC_O, DC_LSE };
enum { TR_NSEQ, TR_S, TR_NB, TR_B, TR_HQ, TR_HKV, TR_DH };
enum {
    TR_Q,
    TR_KCTX,
    TR_VCTX,
    TR_KBLK,
    TR_VBLK,
    TR_ANCH,
    TR_KEEP,
    TR_O,
    TR_LSE,
    TR_DO,
    TR_DQ,
    TR_DKCTX,
    TR_DVCTX,
    TR_DKBLK,
    TR_DVBLK
};
/* loss (LS_*) */
enum { LS_M, LS_H, LS_V };
enum { LS_HID, LS_WLM, LS_LABELS, LS_MASK, LS_LOSS, LS_CE, LS_Q, LS_W, LS_DH, LS_DWLM };

#endif
