/* passes.h — entry points of the passes; the table is in passes.c. */
#ifndef WLOWER_PASSES_H
#define WLOWER_PASSES_H
#include "compiler.h"

int pass_constant_to_initializer(Module *m, PassContext *ctx, Diag *d);
int pass_dce(Module *m, PassContext *ctx, Diag *d);
int pass_identity_elim(Module *m, PassContext *ctx, Diag *d);
int pass_shape_infer(Module *m, PassContext *ctx, Diag *d);
/* canonicalize (issue 4) */
int pass_fold_constants(Module *m, PassContext *ctx, Diag *d);
int pass_canonicalize_layernorm(Module *m, PassContext *ctx, Diag *d);
int pass_canonicalize_gelu(Module *m, PassContext *ctx, Diag *d);
int pass_canonicalize_rmsnorm(Module *m, PassContext *ctx, Diag *d);
int pass_canonicalize_silu(Module *m, PassContext *ctx, Diag *d);
/* fuse (issue 4) */
int pass_fuse_conv_stem(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_ms_attention(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_whisper_attention(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_gqa(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_matmul_nbits(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_qkv(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_logmel(Module *m, PassContext *ctx, Diag *d);
int pass_fuse_argmax(Module *m, PassContext *ctx, Diag *d);
int pass_fp16_attention(Module *m, PassContext *ctx, Diag *d);
int pass_assign_fracbits(Module *m, PassContext *ctx, Diag *d);

/* fuse_logmel.c: Whisper's mel filters [n_mels, 201] (librosa Slaney, sr 16000,
 * n_fft 400) into out. */
void whisper_mel_filters(int n_mels, float *out);

/* shape_infer.c: infer one node's output types from its inputs (used by
 * passes that create nodes). Unknown ops keep declared types. */
int shape_infer_node(Node *n, Diag *d);

/* match.h: the matcher library (match_*, sole_user, fused_node_name, ...)
 * the canonicalize and fuse passes share. */

#endif
