/* host.c — host_compile: LLVM C API code generation → DIR/module.so.
 *
 * Steps: (1) kernel preparation (generators that repack weights rewrite their
 * node's initializer inputs, e.g. MatMulNBits 4-bit → N-interleaved panels);
 * (2) the buffer plan: graph inputs/outputs are the caller's io[] buffers,
 * initializers live in weights.bin (64-byte aligned offsets, order of first
 * use), every other value gets an offset in the workspace from the shared
 * planner (compiler/ir/plan.h: first fit, 64-byte aligned, in node order; a
 * value is alive from its producer to its last reader, a node's scratch
 * during the node only, so bytes are reused once the last reader has run and
 * a node's outputs and scratch never overlap its inputs);
 * (3) one internal function per distinct kernel (hg_kernels.c table; nodes
 * with the same key share one, hg_share.c) and the exported `wl_module_run`,
 * which walks a constant step table (kernel, argument locations) filling an
 * args array per node and calling the kernels in order, and `wl_module_abi`; (4) verify, LLVMRunPasses("default<O3>") for
 * the TargetMachine of --cpu, --emit llvm-ir → module.ll, object emission,
 * `cc -shared` via posix_spawn; (5) manifest.json.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include "hostgen.h"
#include "compiler/ir/plan.h"

extern char **environ;

#define ALIGN64(x) (((x) + 63) & ~(uint64_t)63)

enum { LOC_NONE, LOC_IO, LOC_WEIGHT, LOC_WORK };
typedef struct Loc {
	int kind;
	int64_t index;      /* io slot */
	uint64_t off, size; /* weights / workspace */
} Loc;

typedef struct Plan {
	Loc *loc;           /* by Value.id */
	int nvals;
	uint64_t work_bytes, weight_bytes;
	Value **winits; int nwinits, capw;   /* initializers in weights.bin order */
	uint64_t *scratch_off; /* by node index */
} Plan;

static const char *model_name(const TargetOptions *o) { return o->model_path ? o->model_path : "model"; }

static uint64_t value_bytes(const Value *v)
{
	int64_t n = type_numel(&v->type);
	return n < 0 ? 0 : dtype_nbytes(v->type.elem, n);
}

static int make_plan(HostGen *g, Plan *p, Diag *d)
{
	Module *m = g->m;
	Graph *gr = m->graph;
	p->nvals = m->next_value_id + 1;
	p->loc = calloc((size_t)p->nvals, sizeof *p->loc);
	int nnodes = 0;
	FOR_NODES(gr, n) nnodes++;
	p->scratch_off = calloc((size_t)nnodes + 1, sizeof *p->scratch_off);
	/* io */
	int slot = 0;
	for (int i = 0; i < gr->ninputs; i++) {
		Value *v = gr->inputs[i];
		if (v->init)
			continue;
		p->loc[v->id] = (Loc){LOC_IO, slot++, 0, value_bytes(v)};
	}
	for (int i = 0; i < gr->noutputs; i++) {
		Value *v = gr->outputs[i];
		if (p->loc[v->id].kind == LOC_NONE && !v->init)
			p->loc[v->id] = (Loc){LOC_IO, slot, 0, value_bytes(v)};
		slot++;
	}
	PlanLive *live = plan_liveness(gr, p->nvals);
	Planner work;
	plan_init(&work, 64, PLAN_UNBOUNDED);
	work.empty_is_unit = true;
	work.in_order = true;
	int idx = 0;
	int rc = WL_OK;
	FOR_NODES(gr, n) {
		for (int i = 0; i < n->ninputs; i++) {
			Value *v = n->inputs[i];
			if (!v || !v->init || p->loc[v->id].kind != LOC_NONE)
				continue;
			const Tensor *t = v->init;
			p->loc[v->id] = (Loc){LOC_WEIGHT, 0, p->weight_bytes, t->nbytes};
			p->weight_bytes = ALIGN64(p->weight_bytes + t->nbytes);
			VEC_PUSH(m->arena, p->winits, p->nwinits, p->capw, v);
		}
		for (int i = 0; i < n->noutputs; i++) {
			Value *v = n->outputs[i];
			if (!v || p->loc[v->id].kind != LOC_NONE)
				continue;
			int64_t dims[8];
			if (hg_dims(g, n, v, dims, d) < 0) {
				rc = WL_ERR;
				goto out;
			}
			uint64_t off;
			plan_place(&work, value_bytes(v), idx, live[v->id].last, &off);
			p->loc[v->id] = (Loc){LOC_WORK, 0, off, value_bytes(v)};
		}
		const HgKernel *k = hg_kernel_find(n);
		uint64_t sc = k && k->scratch ? k->scratch(g, n) : 0;
		if (sc)
			plan_place(&work, sc, idx, idx, &p->scratch_off[idx]);
		idx++;
	}
	p->work_bytes = work.peak;
	/* graph outputs that are initializers are copied out of weights.bin */
	for (int i = 0; i < gr->noutputs && rc == WL_OK; i++) {
		Value *v = gr->outputs[i];
		if (!v->init || p->loc[v->id].kind != LOC_NONE)
			continue;
		p->loc[v->id] = (Loc){LOC_WEIGHT, 0, p->weight_bytes, v->init->nbytes};
		p->weight_bytes = ALIGN64(p->weight_bytes + v->init->nbytes);
		VEC_PUSH(m->arena, p->winits, p->nwinits, p->capw, v);
	}
out:
	plan_fini(&work);
	free(live);
	return rc;
}

/* ---------------------------------------------------------------- codegen */

void hg_init_types(HostGen *g)
{
	LLVMContextRef c = g->ctx;
	g->t_void = LLVMVoidTypeInContext(c);
	g->t_i1 = LLVMInt1TypeInContext(c);
	g->t_i8 = LLVMInt8TypeInContext(c);
	g->t_i16 = LLVMInt16TypeInContext(c);
	g->t_i32 = LLVMInt32TypeInContext(c);
	g->t_i64 = LLVMInt64TypeInContext(c);
	g->t_f32 = LLVMFloatTypeInContext(c);
	g->t_f16 = LLVMHalfTypeInContext(c);
	g->t_ptr = LLVMPointerTypeInContext(c, 0);
	g->t_vf = LLVMVectorType(g->t_f32, (unsigned)g->vw);
	g->t_vi32 = LLVMVectorType(g->t_i32, (unsigned)g->vw);
	LLVMTypeRef kp[2] = {g->t_ptr, g->t_ptr};
	g->t_kernel = LLVMFunctionType(g->t_i32, kp, 2, 0);
	LLVMTypeRef bp[3] = {g->t_ptr, g->t_i64, g->t_i64};
	g->t_body = LLVMFunctionType(g->t_void, bp, 3, 0);
	LLVMTypeRef ap[5] = {g->t_ptr, g->t_i32, g->t_ptr, g->t_ptr, g->t_ptr};
	g->t_api = LLVMStructTypeInContext(c, ap, 5, 0);
}

void hg_set_fn_attrs(HostGen *g, LLVMValueRef fn)
{
	const char *kv[][2] = {{"min-legal-vector-width", g->avx512 ? "512" : "256"},
	                       {"prefer-vector-width", g->avx512 ? "512" : "256"},
	                       {"no-trapping-math", "true"}};
	for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
		LLVMAttributeRef a = LLVMCreateStringAttribute(g->ctx, kv[i][0], (unsigned)strlen(kv[i][0]), kv[i][1],
		                                               (unsigned)strlen(kv[i][1]));
		LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, a);
	}
	unsigned nu = LLVMGetEnumAttributeKindForName("nounwind", 8);
	LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(g->ctx, nu, 0));
}

static LLVMValueRef value_ptr(HostGen *g, Plan *p, const Value *v, LLVMValueRef io, LLVMValueRef w, LLVMValueRef ws)
{
	const Loc *l = &p->loc[v->id];
	switch (l->kind) {
	case LOC_IO: {
		LLVMValueRef q = LLVMBuildLoad2(g->b, g->t_ptr, hg_gep(g, g->t_ptr, io, hg_i64(g, l->index)), "io");
		LLVMSetAlignment(q, 8);
		return q;
	}
	case LOC_WEIGHT: return hg_gep(g, g->t_i8, w, hg_i64(g, (int64_t)l->off));
	case LOC_WORK: return hg_gep(g, g->t_i8, ws, hg_i64(g, (int64_t)l->off));
	default: WL_UNREACHABLE();
	}
}

static void sanitize(char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
			*s = '_';
}

/* ---------------------------------------------------------------- steps
 *
 * `wl_module_run` walks a constant step table instead of one call per node
 * in its body (a 100,000-node graph would make one huge function for O3):
 *   kfns[i]      the kernel function of node i (shared kernels repeat);
 *   kfirst[i]    i32, its first entry in kargs; kfirst[nn] ends the last;
 *   kargs[j]     i64, (offset << 3) | kind: 0 absent, 1 io slot, 2 weights
 *                offset, 3 workspace offset (outputs and scratch live there),
 *                4 kconsts entry;
 *   kconsts[k]   pointers to node-specific constant data: the node's index
 *                sites (WlIndexSite), which a shared kernel cannot embed;
 *   knames       "NODE (OpType)" strings, NUL-separated; knoff[i] i32 offsets.
 * `run_step(api, i, io, w, ws, args)` fills args from kargs, calls kfns[i]
 * and returns its status. */
enum { ARG_ABSENT, ARG_IO, ARG_WEIGHT, ARG_WORK, ARG_CONST, ARG_SHIFT = 3 };

typedef struct Steps {
	int64_t *args; int nargs, cap;
	int32_t *first;     /* nn + 1 */
	char *names; size_t nnames, capn;
	int32_t *noff;      /* nn */
	LLVMValueRef *consts; int nconsts, capc;
} Steps;

static int64_t arg_code(const Plan *p, const Value *v)
{
	if (!v)
		return ARG_ABSENT;
	const Loc *l = &p->loc[v->id];
	switch (l->kind) {
	case LOC_IO: return (int64_t)l->index << ARG_SHIFT | ARG_IO;
	case LOC_WEIGHT: return (int64_t)l->off << ARG_SHIFT | ARG_WEIGHT;
	case LOC_WORK: return (int64_t)l->off << ARG_SHIFT | ARG_WORK;
	default: WL_UNREACHABLE();
	}
}

static void push_arg(Steps *st, int64_t code)
{
	if (st->nargs == st->cap) {
		st->cap = st->cap ? 2 * st->cap : 256;
		st->args = realloc(st->args, (size_t)st->cap * sizeof *st->args);
		WL_ASSERT(st->args);
	}
	st->args[st->nargs++] = code;
}

static void push_name(Steps *st, int idx, const Node *n)
{
	char buf[512];
	int len = snprintf(buf, sizeof buf, "%s (%s)", n->name && *n->name ? n->name : "(unnamed)", n->op_type);
	size_t need = (size_t)(len < (int)sizeof buf ? len : (int)sizeof buf - 1) + 1;
	if (st->nnames + need > st->capn) {
		st->capn = (st->nnames + need) * 2;
		st->names = realloc(st->names, st->capn);
		WL_ASSERT(st->names);
	}
	st->noff[idx] = (int32_t)st->nnames;
	memcpy(st->names + st->nnames, buf, need - 1);
	st->names[st->nnames + need - 1] = 0;
	st->nnames += need;
}

static void push_const(Steps *st, LLVMValueRef c)
{
	if (st->nconsts == st->capc) {
		st->capc = st->capc ? 2 * st->capc : 16;
		st->consts = realloc(st->consts, (size_t)st->capc * sizeof *st->consts);
		WL_ASSERT(st->consts);
	}
	push_arg(st, (int64_t)st->nconsts << ARG_SHIFT | ARG_CONST);
	st->consts[st->nconsts++] = c;
}

/* node idx's entries: inputs, outputs, its scratch if it has one, then its
 * own index sites (made here from the kernel's specs: k may be shared) */
static void add_step(HostGen *g, Steps *st, const Plan *p, const Node *n, int idx, uint64_t scratch,
                     const HgKfn *k)
{
	st->first[idx] = st->nargs;
	for (int i = 0; i < n->ninputs; i++)
		push_arg(st, arg_code(p, n->inputs[i]));
	for (int i = 0; i < n->noutputs; i++)
		push_arg(st, arg_code(p, n->outputs[i]));
	if (scratch)
		push_arg(st, (int64_t)p->scratch_off[idx] << ARG_SHIFT | ARG_WORK);
	WL_ASSERT(st->nargs - st->first[idx] == k->arg0);
	for (int i = 0; i < k->nsites; i++)
		push_const(st, hg_site_data(g, n, &k->site[i]));
	st->first[idx + 1] = st->nargs;
	push_name(st, idx, n);
}

static LLVMValueRef const_global(HostGen *g, const char *name, LLVMValueRef init, unsigned align)
{
	LLVMValueRef gv = LLVMAddGlobal(g->mod, LLVMTypeOf(init), name);
	LLVMSetInitializer(gv, init);
	LLVMSetGlobalConstant(gv, 1);
	LLVMSetLinkage(gv, LLVMPrivateLinkage);
	LLVMSetAlignment(gv, align);
	return gv;
}

/* raw bytes as a constant [n x i8] */
static LLVMValueRef bytes_global(HostGen *g, const char *name, const void *p, size_t n)
{
	return const_global(g, name, LLVMConstStringInContext2(g->ctx, n ? p : "", n, 1), 8);
}

/* *(ty *)(base + i * size) */
static LLVMValueRef load_at(HostGen *g, LLVMTypeRef ty, LLVMValueRef base, LLVMValueRef i)
{
	LLVMValueRef q = LLVMBuildLoad2(g->b, ty, hg_gep(g, ty, base, i), "");
	LLVMSetAlignment(q, ty == g->t_i32 ? 4 : 8);
	return q;
}

typedef struct StepGlobals { LLVMValueRef fns, first, args, consts, names, noff; } StepGlobals;

/* int32_t run_step(api, i32 i, io, w, ws, args): kernel i's status */
static LLVMValueRef gen_run_step(HostGen *g, const StepGlobals *sg)
{
	LLVMTypeRef rp[6] = {g->t_ptr, g->t_i32, g->t_ptr, g->t_ptr, g->t_ptr, g->t_ptr};
	LLVMValueRef fn = LLVMAddFunction(g->mod, "run_step", LLVMFunctionType(g->t_i32, rp, 6, 0));
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	hg_set_fn_attrs(g, fn);
	LLVMValueRef api = LLVMGetParam(fn, 0), io = LLVMGetParam(fn, 2), w = LLVMGetParam(fn, 3),
	             ws = LLVMGetParam(fn, 4), args = LLVMGetParam(fn, 5);
	LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"));
	LLVMValueRef i = LLVMBuildZExt(g->b, LLVMGetParam(fn, 1), g->t_i64, "i");
	LLVMValueRef j0 = LLVMBuildSExt(g->b, load_at(g, g->t_i32, sg->first, i), g->t_i64, "j0");
	LLVMValueRef j1 = LLVMBuildSExt(g->b, load_at(g, g->t_i32, sg->first, LLVMBuildAdd(g->b, i, hg_i64(g, 1), "")),
	                                g->t_i64, "j1");
	HgLoop l;
	LLVMValueRef j = hg_loop_begin(g, &l, j0, j1, 1, "j");
	LLVMValueRef code = load_at(g, g->t_i64, sg->args, j);
	LLVMValueRef kind = LLVMBuildAnd(g->b, code, hg_i64(g, (1 << ARG_SHIFT) - 1), "kind");
	LLVMValueRef off = LLVMBuildLShr(g->b, code, hg_i64(g, ARG_SHIFT), "off");
	LLVMBasicBlockRef at = LLVMGetInsertBlock(g->b);
	LLVMBasicBlockRef bio = LLVMAppendBasicBlockInContext(g->ctx, fn, "io"),
	                  bw = LLVMAppendBasicBlockInContext(g->ctx, fn, "w"),
	                  bws = LLVMAppendBasicBlockInContext(g->ctx, fn, "ws"),
	                  bc = LLVMAppendBasicBlockInContext(g->ctx, fn, "const"),
	                  join = LLVMAppendBasicBlockInContext(g->ctx, fn, "join");
	LLVMValueRef sw = LLVMBuildSwitch(g->b, kind, join, 4);
	LLVMAddCase(sw, hg_i64(g, ARG_IO), bio);
	LLVMAddCase(sw, hg_i64(g, ARG_WEIGHT), bw);
	LLVMAddCase(sw, hg_i64(g, ARG_WORK), bws);
	LLVMAddCase(sw, hg_i64(g, ARG_CONST), bc);
	LLVMPositionBuilderAtEnd(g->b, bio);
	LLVMValueRef pio = load_at(g, g->t_ptr, io, off);
	LLVMBuildBr(g->b, join);
	LLVMPositionBuilderAtEnd(g->b, bw);
	LLVMValueRef pw = hg_gep(g, g->t_i8, w, off);
	LLVMBuildBr(g->b, join);
	LLVMPositionBuilderAtEnd(g->b, bws);
	LLVMValueRef pws = hg_gep(g, g->t_i8, ws, off);
	LLVMBuildBr(g->b, join);
	LLVMPositionBuilderAtEnd(g->b, bc);
	LLVMValueRef pc = load_at(g, g->t_ptr, sg->consts, off);
	LLVMBuildBr(g->b, join);
	LLVMPositionBuilderAtEnd(g->b, join);
	LLVMValueRef ptr = LLVMBuildPhi(g->b, g->t_ptr, "p");
	LLVMValueRef vals[5] = {LLVMConstNull(g->t_ptr), pio, pw, pws, pc};
	LLVMBasicBlockRef bbs[5] = {at, bio, bw, bws, bc};
	LLVMAddIncoming(ptr, vals, bbs, 5);
	LLVMSetAlignment(LLVMBuildStore(g->b, ptr, hg_gep(g, g->t_ptr, args, LLVMBuildSub(g->b, j, j0, ""))), 8);
	hg_loop_end(g, &l);
	LLVMValueRef kfn = load_at(g, g->t_ptr, sg->fns, i);
	LLVMValueRef ca[2] = {api, args};
	LLVMBuildRet(g->b, LLVMBuildCall2(g->b, g->t_kernel, kfn, ca, 2, "st"));
	return fn;
}

/* run_step(i32): the kernel's status */
static LLVMValueRef call_step(HostGen *g, LLVMValueRef step, LLVMValueRef i32, LLVMValueRef *aiwws, LLVMValueRef args)
{
	LLVMValueRef ca[6] = {aiwws[0], i32, aiwws[1], aiwws[2], aiwws[3], args};
	return LLVMBuildCall2(g->b, LLVMGlobalGetValueType(step), step, ca, 6, "st");
}

/* if (st != WL_MODULE_OK) return st; in fn */
static void emit_status_check(HostGen *g, LLVMValueRef fn, LLVMValueRef st)
{
	LLVMBasicBlockRef fail = LLVMAppendBasicBlockInContext(g->ctx, fn, "fail"),
	                  next = LLVMAppendBasicBlockInContext(g->ctx, fn, "next");
	LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntNE, st, hg_i32(g, WL_MODULE_OK), ""), fail, next);
	LLVMPositionBuilderAtEnd(g->b, fail);
	LLVMBuildRet(g->b, st);
	LLVMPositionBuilderAtEnd(g->b, next);
}

/* Per-kernel entry points for WLOWER_PROFILE=1 (runtime/rt/wlower_rt.c):
 *   int32_t wl_module_kernel_count(void);
 *   const char *wl_module_kernel_name(int32_t i);    "NODE (OpType)", NULL out of range
 *   int32_t wl_module_run_kernel(api, int32_t i, io, weights, workspace);
 *     kernel i's status (WL_MODULE_OK out of range)
 * Calling run_kernel for i = 0..count-1, stopping at the first status that
 * is not WL_MODULE_OK, equals one wl_module_run (graph outputs that need a
 * copy are copied by the last call when its kernel succeeded). */
static void gen_profile(HostGen *g, const StepGlobals *sg, LLVMValueRef step, int nn, int maxargs,
                        LLVMValueRef copy_fn)
{
	LLVMValueRef cnt = LLVMAddFunction(g->mod, "wl_module_kernel_count", LLVMFunctionType(g->t_i32, NULL, 0, 0));
	LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, cnt, "entry"));
	LLVMBuildRet(g->b, hg_i32(g, nn));

	LLVMValueRef nm = LLVMAddFunction(g->mod, "wl_module_kernel_name", LLVMFunctionType(g->t_ptr, &g->t_i32, 1, 0));
	LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, nm, "entry"));
	LLVMValueRef i = LLVMGetParam(nm, 0);
	LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(g->ctx, nm, "in"),
	                  no = LLVMAppendBasicBlockInContext(g->ctx, nm, "out");
	LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntULT, i, hg_i32(g, nn), ""), yes, no);
	LLVMPositionBuilderAtEnd(g->b, yes);
	LLVMValueRef off = load_at(g, g->t_i32, sg->noff, LLVMBuildZExt(g->b, i, g->t_i64, ""));
	LLVMBuildRet(g->b, hg_gep(g, g->t_i8, sg->names, LLVMBuildZExt(g->b, off, g->t_i64, "")));
	LLVMPositionBuilderAtEnd(g->b, no);
	LLVMBuildRet(g->b, LLVMConstNull(g->t_ptr));

	LLVMTypeRef rp[5] = {g->t_ptr, g->t_i32, g->t_ptr, g->t_ptr, g->t_ptr};
	LLVMValueRef rk = LLVMAddFunction(g->mod, "wl_module_run_kernel", LLVMFunctionType(g->t_i32, rp, 5, 0));
	LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, rk, "entry"));
	LLVMValueRef k = LLVMGetParam(rk, 1);
	LLVMValueRef aiwws[4] = {LLVMGetParam(rk, 0), LLVMGetParam(rk, 2), LLVMGetParam(rk, 3), LLVMGetParam(rk, 4)};
	LLVMValueRef args = hg_alloca(g, g->t_ptr, maxargs, 8, "args");
	LLVMBasicBlockRef in = LLVMAppendBasicBlockInContext(g->ctx, rk, "in"),
	                  out = LLVMAppendBasicBlockInContext(g->ctx, rk, "out");
	LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntULT, k, hg_i32(g, nn), ""), in, out);
	LLVMPositionBuilderAtEnd(g->b, out);
	LLVMBuildRet(g->b, hg_i32(g, WL_MODULE_OK));
	LLVMPositionBuilderAtEnd(g->b, in);
	LLVMValueRef st = call_step(g, step, k, aiwws, args);
	if (copy_fn) {
		/* the copy after the last kernel, when it succeeded */
		emit_status_check(g, rk, st);
		HgIf last;
		hg_if_begin(g, &last, LLVMBuildICmp(g->b, LLVMIntEQ, k, hg_i32(g, nn - 1), ""));
		LLVMBuildCall2(g->b, LLVMGlobalGetValueType(copy_fn), copy_fn, aiwws, 4, "");
		hg_if_end(g, &last);
	}
	LLVMBuildRet(g->b, st);
}

/* A graph io value as module_abi.h's WlModuleIo {name, dims, dtype, rank}
 * (a dim that is not static is -1: manifest_new refuses it later). */
static LLVMValueRef io_entry(HostGen *g, const Value *v)
{
	int64_t dims[8];
	int rank = v->type.has_shape ? v->type.rank : 0;
	for (int i = 0; i < rank && i < 8; i++)
		dims[i] = v->type.dims[i].kind == DIM_VALUE ? v->type.dims[i].value : -1;
	LLVMValueRef f[4] = {hg_const_str(g, v->name), hg_const_i64s(g, dims, rank < 8 ? rank : 8),
	                     hg_i32(g, v->type.elem), hg_i32(g, rank)};
	return LLVMConstStructInContext(g->ctx, f, 4, 0);
}

/* const WlModuleInfo *wl_module_info(void): the io, workspace and weights
 * this code was generated for; the runtime checks manifest.json against it. */
static void gen_info(HostGen *g, Plan *p)
{
	Graph *gr = g->m->graph;
	LLVMValueRef *ios = calloc((size_t)(gr->ninputs + gr->noutputs) + 1, sizeof *ios);
	int nin = 0, nio = 0;
	for (int i = 0; i < gr->ninputs; i++)
		if (!gr->inputs[i]->init)
			ios[nio++] = io_entry(g, gr->inputs[i]);
	nin = nio;
	for (int i = 0; i < gr->noutputs; i++)
		ios[nio++] = io_entry(g, gr->outputs[i]);
	LLVMTypeRef ft[4] = {g->t_ptr, g->t_ptr, g->t_i32, g->t_i32};
	LLVMTypeRef iot = LLVMStructTypeInContext(g->ctx, ft, 4, 0);
	LLVMValueRef arr = LLVMAddGlobal(g->mod, LLVMArrayType2(iot, (uint64_t)nio), "wl_io");
	LLVMSetInitializer(arr, LLVMConstArray2(iot, ios, (uint64_t)nio));
	LLVMSetGlobalConstant(arr, 1);
	LLVMSetLinkage(arr, LLVMPrivateLinkage);
	free(ios);
	LLVMValueRef f[7] = {hg_i32(g, WL_MODULE_ABI), hg_i32(g, nin), hg_i32(g, nio - nin), hg_i32(g, 0), arr,
	                     LLVMConstInt(g->t_i64, p->work_bytes, 0), LLVMConstInt(g->t_i64, p->weight_bytes, 0)};
	LLVMValueRef init = LLVMConstStructInContext(g->ctx, f, 7, 0);
	LLVMValueRef info = LLVMAddGlobal(g->mod, LLVMTypeOf(init), "wl_info");
	LLVMSetInitializer(info, init);
	LLVMSetGlobalConstant(info, 1);
	LLVMSetLinkage(info, LLVMPrivateLinkage);
	LLVMValueRef fn = LLVMAddFunction(g->mod, "wl_module_info", LLVMFunctionType(g->t_ptr, NULL, 0, 0));
	LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"));
	LLVMBuildRet(g->b, info);
}

/* the kernel of node n (index idx) in *out: a shared one or a new one */
static int node_kernel(HostGen *g, HgShare *share, const Node *n, int idx, uint64_t scratch, HgKfn *out, Diag *d)
{
	const HgKernel *k = hg_kernel_find(n);
	const HgKfn *have = hg_share_find(share, n, scratch);
	if (have) {
		*out = *have;
		return WL_OK;
	}
	*out = (HgKfn){.arg0 = n->ninputs + n->noutputs + (scratch ? 1 : 0)};
	char name[160];
	snprintf(name, sizeof name, "k%d_%s", idx, n->op_type);
	sanitize(name);
	LLVMValueRef fn = out->fn = LLVMAddFunction(g->mod, name, g->t_kernel);
	LLVMSetLinkage(fn, LLVMInternalLinkage);
	hg_set_fn_attrs(g, fn);
	/* one function per kernel also after O3 (profiling, lit tests) */
	LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
	                        LLVMCreateEnumAttribute(g->ctx, LLVMGetEnumAttributeKindForName("noinline", 8), 0));
	LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, fn, "entry"));
	g->cur = out;
	int rc = k->emit(g, n, fn, d);
	g->cur = NULL;
	if (rc != WL_OK)
		return WL_ERR;
	LLVMBuildRet(g->b, hg_i32(g, WL_MODULE_OK));
	hg_share_add(share, n, scratch, out);
	return WL_OK;
}

/* graph outputs not written by a node into their own io slot: copied by an
 * internal function (also called by the profiling entry point); NULL if none */
static LLVMValueRef gen_copy_outputs(HostGen *g, Plan *p)
{
	Graph *gr = g->m->graph;
	int nin = 0;
	for (int i = 0; i < gr->ninputs; i++)
		if (!gr->inputs[i]->init)
			nin++;
	LLVMTypeRef rp[4] = {g->t_ptr, g->t_ptr, g->t_ptr, g->t_ptr};
	LLVMValueRef copy_fn = NULL;
	for (int i = 0; i < gr->noutputs; i++) {
		Value *v = gr->outputs[i];
		Loc *l = &p->loc[v->id];
		if (l->kind == LOC_IO && l->index == nin + i)
			continue;
		if (!copy_fn) {
			copy_fn = LLVMAddFunction(g->mod, "copy_outputs", LLVMFunctionType(g->t_void, rp, 4, 0));
			LLVMSetLinkage(copy_fn, LLVMInternalLinkage);
			LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, copy_fn, "entry"));
		}
		LLVMValueRef cio = LLVMGetParam(copy_fn, 1), cw = LLVMGetParam(copy_fn, 2), cws = LLVMGetParam(copy_fn, 3);
		LLVMValueRef dst = LLVMBuildLoad2(g->b, g->t_ptr, hg_gep(g, g->t_ptr, cio, hg_i64(g, nin + i)), "out");
		LLVMValueRef src = value_ptr(g, p, v, cio, cw, cws);
		LLVMBuildMemCpy(g->b, dst, 1, src, 1, hg_i64(g, (int64_t)value_bytes(v)));
	}
	if (copy_fn)
		LLVMBuildRetVoid(g->b);
	return copy_fn;
}

static void gen_globals(HostGen *g, StepGlobals *sg, const Steps *st, LLVMValueRef *fns, int nn)
{
	sg->fns = const_global(g, "kfns", LLVMConstArray2(g->t_ptr, fns, (uint64_t)nn), 8);
	sg->first = bytes_global(g, "kfirst", st->first, (size_t)(nn + 1) * sizeof *st->first);
	sg->args = bytes_global(g, "kargs", st->args, (size_t)st->nargs * sizeof *st->args);
	sg->consts = const_global(g, "kconsts", LLVMConstArray2(g->t_ptr, st->consts, (uint64_t)st->nconsts), 8);
	sg->names = bytes_global(g, "knames", st->names, st->nnames);
	sg->noff = bytes_global(g, "knoff", st->noff, (size_t)nn * sizeof *st->noff);
}

static void steps_free(Steps *st)
{
	free(st->args);
	free(st->first);
	free(st->names);
	free(st->noff);
	free(st->consts);
}

static int gen_module(HostGen *g, Plan *p, Diag *d)
{
	Graph *gr = g->m->graph;
	int nn = 0;
	FOR_NODES(gr, n) nn++;
	LLVMValueRef *fns = calloc((size_t)nn + 1, sizeof *fns);
	Steps st = {0};
	st.first = calloc((size_t)nn + 1, sizeof *st.first);
	st.noff = calloc((size_t)nn + 1, sizeof *st.noff);
	HgShare *share = hg_share_new();
	WL_ASSERT(fns && st.first && st.noff);
	int idx = 0, maxargs = 1, rc = WL_ERR;
	FOR_NODES(gr, n) {
		const HgKernel *k = hg_kernel_find(n);
		if (!k) {
			char op[sizeof d->msg];
			diag_fail(d, "%s: node '%s': op '%s' has no host kernel (--target host)", model_name(g->opt), n->name,
			          node_op_name(n, op, sizeof op));
			goto out;
		}
		uint64_t sc = k->scratch ? k->scratch(g, n) : 0;
		HgKfn kf;
		if (node_kernel(g, share, n, idx, sc, &kf, d) != WL_OK)
			goto out;
		fns[idx] = kf.fn;
		add_step(g, &st, p, n, idx, sc, &kf);
		int na = st.first[idx + 1] - st.first[idx];
		if (na > maxargs)
			maxargs = na;
		idx++;
	}
	/* set attributes on outlined bodies too */
	for (LLVMValueRef f = LLVMGetFirstFunction(g->mod); f; f = LLVMGetNextFunction(f))
		if (!LLVMIsDeclaration(f) && LLVMGetLinkage(f) == LLVMInternalLinkage &&
		    LLVMGetTypeKind(LLVMGlobalGetValueType(f)) == LLVMFunctionTypeKind &&
		    LLVMGlobalGetValueType(f) == g->t_body)
			hg_set_fn_attrs(g, f);

	/* int32_t wl_module_abi(void) */
	LLVMValueRef abi = LLVMAddFunction(g->mod, "wl_module_abi", LLVMFunctionType(g->t_i32, NULL, 0, 0));
	LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, abi, "entry"));
	LLVMBuildRet(g->b, hg_i32(g, WL_MODULE_ABI));

	gen_info(g, p);

	StepGlobals sg;
	gen_globals(g, &sg, &st, fns, nn);
	LLVMValueRef step = gen_run_step(g, &sg);
	LLVMValueRef copy_fn = gen_copy_outputs(g, p);

	/* int32_t wl_module_run(api, io, weights, workspace): the first failing
	 * kernel's status (the later kernels and the output copy do not run), or
	 * WL_MODULE_OK */
	LLVMTypeRef rp[4] = {g->t_ptr, g->t_ptr, g->t_ptr, g->t_ptr};
	LLVMValueRef run = LLVMAddFunction(g->mod, "wl_module_run", LLVMFunctionType(g->t_i32, rp, 4, 0));
	hg_set_fn_attrs(g, run);
	LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, run, "entry"));
	LLVMValueRef aiwws[4] = {LLVMGetParam(run, 0), LLVMGetParam(run, 1), LLVMGetParam(run, 2), LLVMGetParam(run, 3)};
	LLVMValueRef args = hg_alloca(g, g->t_ptr, maxargs, 8, "args");
	HgLoop l;
	LLVMValueRef i = hg_loop_begin(g, &l, hg_i64(g, 0), hg_i64(g, nn), 1, "step");
	emit_status_check(g, run, call_step(g, step, LLVMBuildTrunc(g->b, i, g->t_i32, ""), aiwws, args));
	hg_loop_end(g, &l);
	if (copy_fn)
		LLVMBuildCall2(g->b, LLVMGlobalGetValueType(copy_fn), copy_fn, aiwws, 4, "");
	LLVMBuildRet(g->b, hg_i32(g, WL_MODULE_OK));
	gen_profile(g, &sg, step, nn, maxargs, copy_fn);
	rc = WL_OK;
out:
	hg_share_free(share);
	steps_free(&st);
	free(fns);
	return rc;
}

/* ---------------------------------------------------------------- files */

static int write_weights(Plan *p, const char *dir, Diag *d)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/weights.bin", dir);
	FILE *f = fopen(path, "wb");
	if (!f)
		return diag_fail(d, "%s: %s", path, strerror(errno));
	static const char zero[64];
	uint64_t pos = 0;
	for (int i = 0; i < p->nwinits; i++) {
		Value *v = p->winits[i];
		const Loc *l = &p->loc[v->id];
		if (l->off > pos)
			fwrite(zero, 1, l->off - pos, f);
		pos = l->off;
		if (v->init->nbytes && fwrite(v->init->data, 1, v->init->nbytes, f) != v->init->nbytes)
			break;
		pos += v->init->nbytes;
	}
	if (p->weight_bytes > pos)
		fwrite(zero, 1, p->weight_bytes - pos, f);
	if (ferror(f) | (fclose(f) != 0))
		return diag_fail(d, "%s: write failed", path);
	return WL_OK;
}

/* cc -shared -o so obj; its stderr is read through a pipe so that a failure
 * is one line (the first thing cc or ld said, e.g. "No space left on device"). */
int hg_run_cc(const char *so, const char *obj, Diag *d)
{
	char *argv[] = {"cc", "-shared", "-o", (char *)so, (char *)obj, NULL};
	int fds[2];
	if (pipe(fds) != 0)
		return diag_fail(d, "%s: pipe: %s", so, strerror(errno));
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
	posix_spawn_file_actions_addclose(&fa, fds[0]);
	pid_t pid;
	int e = posix_spawnp(&pid, "cc", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (e) {
		close(fds[0]);
		return diag_fail(d, "%s: cannot run cc: %s", so, strerror(e));
	}
	char msg[512] = "";
	size_t got = 0;
	ssize_t r;
	char buf[4096];
	while ((r = read(fds[0], buf, sizeof buf)) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (ssize_t i = 0; i < r && got + 1 < sizeof msg; i++)
			msg[got++] = buf[i];
	}
	msg[got] = 0;
	close(fds[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return diag_fail(d, "%s: waitpid: %s", so, strerror(errno));
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		msg[strcspn(msg, "\n")] = 0;
		return diag_fail(d, "%s: 'cc -shared' failed%s%s", so, msg[0] ? ": " : "", msg);
	}
	return WL_OK;
}

/* "+a,-b,+c" (LLVM's host feature list) has the whole entry "+feat" */
static bool feature_on(const char *features, const char *feat)
{
	size_t n = strlen(feat);
	for (const char *p = features; *p; p += strcspn(p, ","), p += *p == ',')
		if (p[0] == '+' && !strncmp(p + 1, feat, n) && (p[1 + n] == ',' || p[1 + n] == 0))
			return true;
	return false;
}

/* The AVX-512 path: AVX512F and AVX512BW (its int8 kernels use 512-bit
 * vpmaddwd; Knights Landing/Mill have F without BW and take the AVX2 path) */
static bool cpu_has_avx512(const char *cpu, const char *features)
{
	if (features && *features)
		return feature_on(features, "avx512f") && feature_on(features, "avx512bw");
	static const char *names[] = {"x86-64-v4", "skylake-avx512", "skx", "cascadelake", "cooperlake", "cannonlake",
	                              "icelake-client", "icelake-server", "tigerlake", "rocketlake",
	                              "sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d",
	                              "znver4", "znver5", NULL};
	for (int i = 0; names[i]; i++)
		if (!strcmp(cpu, names[i]))
			return true;
	return false;
}

/* AVX, AVX2 and FMA3: by feature for native, by name otherwise (an AVX-512
 * or AVX2 CPU has all three; bdver2/bdver3 have AVX and FMA3 without AVX2).
 * Older CPUs still compile: without AVX (x86-64, x86-64-v2, Atom up to
 * Tremont) vectors are 4 floats (SSE), without FMA3 (Sandy/Ivy Bridge,
 * Jaguar, Bulldozer) an FMA is a multiply and an add, without AVX2 the
 * integer vpmaddwd runs on SSE2 halves. */
static bool cpu_has_feature_name(const char *cpu, const char *features, const char *feat)
{
	if (features && *features)
		return feature_on(features, feat);
	static const char *avx2[] = {"x86-64-v3", "haswell", "core-avx2", "broadwell", "skylake", "alderlake",
	                             "raptorlake", "meteorlake", "arrowlake", "arrowlake-s", "lunarlake", "gracemont",
	                             "pantherlake", "sierraforest", "grandridge", "clearwaterforest", "knl", "knm",
	                             "bdver4", "znver1", "znver2", "znver3", NULL};
	if (cpu_has_avx512(cpu, NULL))
		return true;
	for (int i = 0; avx2[i]; i++)
		if (!strcmp(cpu, avx2[i]))
			return true;
	static const char *avx1[] = {"sandybridge", "corei7-avx", "ivybridge", "core-avx-i", "btver2", "bdver1",
	                             "bdver2", "bdver3", NULL};
	if (!strcmp(feat, "avx"))
		for (int i = 0; avx1[i]; i++)
			if (!strcmp(cpu, avx1[i]))
				return true;
	return !strcmp(feat, "fma") && (!strcmp(cpu, "bdver2") || !strcmp(cpu, "bdver3"));
}

/* vpdpbusd available: AVX512-VNNI with AVX-512, AVX-VNNI without (the
 * 256-bit form); by name when --cpu names a processor (features empty).
 * WLOWER_HOST_NO_VNNI=1 turns it off (the AVX2 pmaddwd path, A/B runs). */
static bool cpu_has_vnni(const char *cpu, const char *features, bool avx512)
{
	if (getenv("WLOWER_HOST_NO_VNNI") && strcmp(getenv("WLOWER_HOST_NO_VNNI"), "0"))
		return false;
	if (features && *features)
		return feature_on(features, avx512 ? "avx512vnni" : "avxvnni");
	static const char *v512[] = {"cascadelake", "cooperlake", "icelake-client", "icelake-server", "tigerlake",
	                             "rocketlake", "sapphirerapids", "emeraldrapids", "graniterapids",
	                             "graniterapids-d", "znver4", "znver5", NULL};
	static const char *v256[] = {"alderlake", "raptorlake", "meteorlake", "arrowlake", "arrowlake-s", "lunarlake",
	                             "gracemont", "sierraforest", "grandridge", "pantherlake", "clearwaterforest",
	                             NULL};
	const char *const *l = avx512 ? v512 : v256;
	for (int i = 0; l[i]; i++)
		if (!strcmp(cpu, l[i]))
			return true;
	return false;
}

static bool cpu_has_bf16_name(const char *cpu)
{
	static const char *names[] = {"cooperlake", "sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d",
	                              "znver4", "znver5", NULL};
	for (int i = 0; names[i]; i++)
		if (!strcmp(cpu, names[i]))
			return true;
	return false;
}

int host_compile(Module *m, const TargetOptions *o, const char *dir, Diag *d)
{
	LLVMInitializeX86TargetInfo();
	LLVMInitializeX86Target();
	LLVMInitializeX86TargetMC();
	LLVMInitializeX86AsmPrinter();

	const char *cpu_opt = o->host.cpu ? o->host.cpu : "native";
	char *cpu, *features;
	if (!strcmp(cpu_opt, "native")) {
		cpu = LLVMGetHostCPUName();
		features = LLVMGetHostCPUFeatures();
	} else {
		cpu = LLVMCreateMessage(cpu_opt);
		features = LLVMCreateMessage("");
	}
	char *triple = LLVMGetDefaultTargetTriple();
	char *err = NULL;
	LLVMTargetRef target;
	int rc = WL_ERR;
	HostGen g = {0};
	Plan plan = {0};
	Manifest *mf = NULL;
	if (LLVMGetTargetFromTriple(triple, &target, &err)) {
		diag_fail(d, "%s: --target host: %s", model_name(o), err);
		LLVMDisposeMessage(err);
		goto done;
	}
	g.tm = LLVMCreateTargetMachine(target, triple, cpu, features, LLVMCodeGenLevelAggressive, LLVMRelocPIC,
	                               LLVMCodeModelDefault);
	g.ctx = LLVMContextCreate();
	g.mod = LLVMModuleCreateWithNameInContext("wlower", g.ctx);
	g.b = LLVMCreateBuilderInContext(g.ctx);
	g.m = m;
	g.opt = o;
	g.avx512 = cpu_has_avx512(cpu, features);
	g.avx2 = cpu_has_feature_name(cpu, features, "avx2");
	g.vw = g.avx512 ? 16 : g.avx2 || cpu_has_feature_name(cpu, features, "avx") ? 8 : 4;
	g.fma = cpu_has_feature_name(cpu, features, "fma");
	g.vnni = cpu_has_vnni(cpu, features, g.avx512);
	HgCpu hcpu;
	host_cpu_describe(&hcpu, cpu, !strcmp(cpu_opt, "native"));
	hcpu.autotune = hcpu.native && !o->host.no_autotune;
	g.cpu = &hcpu;
	/* --host-precision: bf16 needs AVX512-BF16 (by feature for native, by name otherwise) */
	const char *prec = o->host.precision ? o->host.precision : "fp32";
	bool has_bf16 = g.avx512 && (*features ? strstr(features, "+avx512bf16") != NULL : cpu_has_bf16_name(cpu));
	if (!strcmp(prec, "bf16") && !has_bf16) {
		diag_fail(d, "%s: --host-precision bf16: CPU '%s' has no AVX512-BF16 (use --host-precision auto or fp32)",
		          model_name(o), cpu);
		goto done;
	}
	g.bf16 = !strcmp(prec, "bf16") || (!strcmp(prec, "auto") && has_bf16);
	hg_init_types(&g);
	LLVMSetTarget(g.mod, triple);
	LLVMTargetDataRef td = LLVMCreateTargetDataLayout(g.tm);
	char *dl = LLVMCopyStringRepOfTargetData(td);
	LLVMSetDataLayout(g.mod, dl);
	LLVMDisposeMessage(dl);
	LLVMDisposeTargetData(td);

	FOR_NODES(m->graph, n) {
		if (n->op == OP_WlMatMulNBits && hg_prepare_matmul_nbits(&g, n, d) != WL_OK)
			goto done;
		if (n->op == OP_WlQMatMul && (hg_check_scales(&g, n, d) != WL_OK || hg_prepare_qmatmul(&g, n, d) != WL_OK))
			goto done;
		if ((n->op == OP_QuantizeLinear || n->op == OP_DequantizeLinear) && hg_prepare_qdq(&g, n, d) != WL_OK)
			goto done;
		if (n->op == OP_Pow && hg_check_pow(&g, n, d) != WL_OK)
			goto done;
		if (n->op == OP_WlConvStem && hg_prepare_conv_stem(&g, n, d) != WL_OK)
			goto done;
	}
	if (make_plan(&g, &plan, d) != WL_OK || gen_module(&g, &plan, d) != WL_OK)
		goto done;
	if (LLVMVerifyModule(g.mod, LLVMReturnStatusAction, &err)) {
		if (getenv("WLOWER_HOST_DUMP"))
			LLVMDumpModule(g.mod);
		wl_die(__FILE__, __LINE__, "host codegen produced invalid LLVM IR: %s", err);
	}
	LLVMDisposeMessage(err);
	err = NULL;
	LLVMPassBuilderOptionsRef pbo = LLVMCreatePassBuilderOptions();
	LLVMErrorRef pe = LLVMRunPasses(g.mod, "default<O3>", g.tm, pbo);
	LLVMDisposePassBuilderOptions(pbo);
	if (pe) {
		char *msg = LLVMGetErrorMessage(pe);
		diag_fail(d, "%s: LLVM optimization failed: %s", model_name(o), msg);
		LLVMDisposeErrorMessage(msg);
		goto done;
	}
	char path[4096], obj[4096];
	if (o->host.emit_llvm_ir) {
		snprintf(path, sizeof path, "%s/module.ll", dir);
		if (LLVMPrintModuleToFile(g.mod, path, &err)) {
			diag_fail(d, "%s: %s", path, err);
			LLVMDisposeMessage(err);
			goto done;
		}
	}
	snprintf(obj, sizeof obj, "%s/module.o", dir);
	/* to memory, then written with checks: LLVM's file output aborts the
	 * process on a write error (a full disk), before our cleanup can run */
	LLVMMemoryBufferRef mb = NULL;
	if (LLVMTargetMachineEmitToMemoryBuffer(g.tm, g.mod, LLVMObjectFile, &err, &mb)) {
		diag_fail(d, "%s: %s", obj, err);
		LLVMDisposeMessage(err);
		goto done;
	}
	FILE *of = fopen(obj, "wb");
	size_t olen = LLVMGetBufferSize(mb);
	bool wrote = of && fwrite(LLVMGetBufferStart(mb), 1, olen, of) == olen;
	if (of && fclose(of) != 0)
		wrote = false;
	LLVMDisposeMemoryBuffer(mb);
	if (!wrote) {
		diag_fail(d, "%s: write failed: %s", obj, strerror(errno));
		goto done;
	}
	snprintf(path, sizeof path, "%s/module.so", dir);
	int lr = hg_run_cc(path, obj, d);
	unlink(obj);
	if (lr != WL_OK || write_weights(&plan, dir, d) != WL_OK)
		goto done;

	ManifestInfo mi = target_manifest_info(o);
	if (manifest_new(m, &mi, &mf, d) != WL_OK)
		goto done;
	cJSON *hw = manifest_hardware(mf), *pr = manifest_program(mf);
	cJSON_AddStringToObject(hw, "cpu", cpu);
	/* a named CPU has no feature list from LLVM: record the ones the generated
	 * code stands on, so that the runtime refuses the module on a CPU without
	 * them (a clear error instead of SIGILL); AVX2 implies x86-64-v3's BMI1/2
	 * and F16C, which LLVM uses in scalar code */
	char named[160];
	bool phi = !strcmp(cpu, "knl") || !strcmp(cpu, "knm");   /* AVX512F without BW: LLVM may still use it */
	snprintf(named, sizeof named, "%s%s%s%s%s%s",
	         g.avx512 ? "+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx512cd," : phi ? "+avx512f,+avx512cd," : "",
	         g.avx2 ? "+avx2,+bmi,+bmi2,+f16c," : "", g.vw >= 8 ? "+avx," : "", g.fma ? "+fma," : "",
	         g.vnni ? (g.avx512 ? "+avx512vnni," : "+avxvnni,") : "", g.bf16 ? "+avx512bf16," : "");
	if (*named)
		named[strlen(named) - 1] = 0;
	cJSON_AddStringToObject(hw, "features", *features ? features : named);
	cJSON_AddStringToObject(pr, "host_precision", g.bf16 ? "bf16" : "fp32");
	cJSON_AddNumberToObject(hw, "vector_bits", g.vw * 32);
	cJSON_AddStringToObject(hw, "cpu_model", hcpu.model);
	cJSON *cj = cJSON_AddObjectToObject(hw, "caches");
	cJSON_AddNumberToObject(cj, "l1d", (double)hcpu.l1d);
	cJSON_AddNumberToObject(cj, "l2", (double)hcpu.l2);
	cJSON_AddNumberToObject(cj, "l3", (double)hcpu.l3);
	cJSON_AddStringToObject(cj, "source", hcpu.cache_source);
	/* the blocking of each MatMulNBits on the panel path (docs/host-contracts.md) */
	cJSON *bj = cJSON_AddArrayToObject(pr, "matmul_blocking");
	FOR_NODES(m->graph, n) {
		if (n->op != OP_WlMatMulNBits || !node_attr(n, "host_mr"))
			continue;
		static const char *const hows[] = {"model", "autotune", "cache", "forced"};
		int64_t how = attr_int(n, "host_tune", 0);
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "node", n->name);
		cJSON_AddNumberToObject(e, "K", (double)attr_int(n, "K", 0));
		cJSON_AddNumberToObject(e, "N", (double)attr_int(n, "N", 0));
		cJSON_AddNumberToObject(e, "mr", (double)attr_int(n, "host_mr", 0));
		cJSON_AddNumberToObject(e, "nv", (double)attr_int(n, "host_nv", 0));
		cJSON_AddNumberToObject(e, "mc", (double)attr_int(n, "host_mc", 0));
		cJSON_AddNumberToObject(e, "kc", (double)attr_int(n, "host_kc", 0));
		cJSON_AddStringToObject(e, "how", hows[how >= 0 && how < 4 ? how : 0]);
		cJSON_AddStringToObject(e, "weights", attr_int(n, "host_bf16w", 0) ? "bf16" : attr_int(n, "bits", 4) == 4 ? "4-bit" : "float");
		const Attr *ms = node_attr(n, "host_tune_ms");
		if (ms && ms->f > 0)
			cJSON_AddNumberToObject(e, "tuned_ms", (double)(int64_t)(ms->f * 1e4 + 0.5) / 1e4);
		cJSON_AddItemToArray(bj, e);
	}
	cJSON_AddNumberToObject(pr, "workspace_bytes", (double)plan.work_bytes);
	cJSON_AddNumberToObject(pr, "abi", WL_MODULE_ABI);
	cJSON_AddNumberToObject(pr, "threads", o->host.threads);
	if (manifest_add_file(mf, dir, "module.so", d) != WL_OK || manifest_add_file(mf, dir, "weights.bin", d) != WL_OK ||
	    (o->host.emit_llvm_ir && manifest_add_file(mf, dir, "module.ll", d) != WL_OK))
		goto done;
	rc = manifest_write(mf, dir, d);
	mf = NULL;
done:
	manifest_free(mf);
	free(plan.loc);
	free(plan.scratch_off);
	if (g.b)
		LLVMDisposeBuilder(g.b);
	if (g.mod)
		LLVMDisposeModule(g.mod);
	if (g.ctx)
		LLVMContextDispose(g.ctx);
	if (g.tm)
		LLVMDisposeTargetMachine(g.tm);
	LLVMDisposeMessage(cpu);
	LLVMDisposeMessage(features);
	LLVMDisposeMessage(triple);
	return rc;
}
