/* emit_cpp.c — the files of a Chimera module directory (but manifest.json):
 *
 *   module.cpp     header comment, #include "ccl.hpp", one
 *                  `static void kN(ccl::Ctx &c)` per kernel (a comment line:
 *                  node, op, shapes, formats, split; the DMA of staged
 *                  weights and filled inputs; the call from ccl_emit_call;
 *                  the DMA of module outputs), then the IO and Kernel tables
 *                  and `extern "C" const ccl::Program wl_program`.
 *   weights.bin    the blobs of the kernels (ops/), in kernel then blob
 *                  order, each at a 64-byte aligned offset (zero padding).
 *   schedule.json  a Schedule (runtime/module/schedule.h, written by
 *                  schedule_write): kernels in order with split, cores,
 *                  tile, buffers, DMA, per-core counts.
 * Everything is in graph order: two compiles give the same bytes.
 */
#include <stdlib.h>
#include <string.h>
#include "chimera.h"

static void cpp_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f)
			fprintf(f, "\\%03o", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* text safe inside a // comment (no newlines) */
static void comment_str(FILE *f, const char *s)
{
	for (const char *p = s; *p; p++)
		fputc(*p == '\n' || *p == '\r' ? ' ' : *p, f);
}

static void shape_str(FILE *f, const Value *v)
{
	fputc('[', f);
	for (int i = 0; i < v->type.rank; i++)
		fprintf(f, "%s%lld", i ? "," : "", (long long)v->type.dims[i].value);
	fputc(']', f);
}

/* "<head>name [shape] fmt, ..." of the activations among vs (absent values
 * and initializers skipped); nothing if there are none */
static void values_comment(FILE *f, const char *head, Value *const *vs, int nv)
{
	int n = 0;
	char fb[16];
	for (int j = 0; j < nv; j++) {
		const Value *v = vs[j];
		if (!v || v->init)
			continue;
		fputs(n++ ? ", " : head, f);
		comment_str(f, v->name);
		fputc(' ', f);
		shape_str(f, v);
		fprintf(f, " %s", ch_fmt_label(v, fb));
	}
}

static const char *base_name(Arena *a, const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	const char *dot = strrchr(b, '.');
	return dot && dot != b ? arena_strndup(a, b, (size_t)(dot - b)) : arena_strdup(a, b);
}

static const char *mem_base(int mem)
{
	return mem == CH_MEM_OCM ? "c.ocm" : mem == CH_MEM_DDR ? "c.ddr" : "c.w";
}

static void emit_dma(FILE *f, const ChDma *dm, const char *what_note)
{
	fprintf(f, "\tccl::dma(c, %s + %llu, %s + %llu, %llu, ccl::%s);  // %s\n", mem_base(dm->dst_mem),
	        (unsigned long long)dm->dst_off, mem_base(dm->src_mem), (unsigned long long)dm->src_off,
	        (unsigned long long)dm->bytes, dm->dir == 0 ? "DDR_TO_OCM" : "OCM_TO_DDR", what_note);
}

/* The kernel's DMA of direction dir (0 before the call, 1 after it), each
 * noted with what it moves: the buffer at its OCM end (after the call: an
 * output). */
static void emit_dmas(FILE *f, ChModule *cm, const ChKernel *k, int dir)
{
	for (int j = 0; j < k->ndma; j++) {
		const ChDma *dm = &k->dma[j];
		if (dm->dir != dir)
			continue;
		int mem = dir == 0 ? dm->dst_mem : dm->src_mem;
		uint64_t off = dir == 0 ? dm->dst_off : dm->src_off;
		const char *note = dm->what;
		for (int b = 0; b < k->nbuf; b++)
			if (k->buf[b].mem == mem && k->buf[b].off == off && (dir == 0 || !strcmp(k->buf[b].role, "out")))
				note = arena_printf(cm->a, "%s %s", dm->what, k->buf[b].value);
		emit_dma(f, dm, note);
	}
}

/* a C++ double literal, exact and always with '.' or 'e' */
static const char *cpp_double(double x, char buf[40])
{
	snprintf(buf, 40, "%.17g", x);
	if (!strpbrk(buf, ".eEni"))
		strcat(buf, ".0");
	return buf;
}

static void emit_io(FILE *f, ChModule *cm, const Value *v)
{
	const ChVal *cv = &cm->vals[v->id];
	fputs("\t{", f);
	cpp_str(f, v->name);
	fprintf(f, ", \"%s\", %d, %d, {", manifest_io_dtype(v->type.elem), ch_fmt(v), v->type.rank);
	for (int i = 0; i < v->type.rank && i < 8; i++)
		fprintf(f, "%s%lld", i ? ", " : "", (long long)v->type.dims[i].value);
	if (v->type.rank == 0)
		fputs("0", f);
	fprintf(f, "}, ccl::%s, %lluull, %lluull},\n", cv->mem == CH_MEM_OCM ? "MEM_OCM" : "MEM_DDR",
	        (unsigned long long)cv->off, (unsigned long long)cv->bytes);
}

/* `static const ccl::IO NAME[]`: the values that are not initializers (a
 * null row if none); returns their count. */
static int emit_io_table(FILE *f, ChModule *cm, const char *name, Value *const *vs, int nv)
{
	int n = 0;
	fprintf(f, "\nstatic const ccl::IO %s[] = {\n", name);
	for (int i = 0; i < nv; i++)
		if (!vs[i]->init) {
			emit_io(f, cm, vs[i]);
			n++;
		}
	if (!n)
		fputs("\t{nullptr, nullptr, 0, 0, {0}, ccl::MEM_DDR, 0ull, 0ull},\n", f);
	fputs("};\n", f);
	return n;
}

static int write_module_cpp(ChModule *cm, const char *dir, Diag *d)
{
	const ChimeraConfig *cfg = cm->cfg;
	Graph *g = cm->m->graph;
	char path[4096];
	snprintf(path, sizeof path, "%s/module.cpp", dir);
	AtomicFile af;
	if (atomic_open(&af, path, d) != WL_OK)
		return WL_ERR;
	FILE *f = af.f;
	const char *mod = base_name(cm->a, cm->o->model_path ? cm->o->model_path : "module");
	uint64_t macs = 0;
	for (int i = 0; i < cm->nk; i++)
		macs += cm->k[i].ki.macs;
	fprintf(f, "// module.cpp — generated by wlower %s; do not edit.\n", WLOWER_VERSION);
	fputs("// model: ", f);
	comment_str(f, mod);
	fprintf(f, "; target %s: %d cores, %dx%d PEs, %d MACs/PE, LRM %llu B/PE, OCM %llu B\n",
	        cm->o->target_name ? cm->o->target_name : "qc-p", cfg->cores, cfg->pe_rows, cfg->pe_cols,
	        cfg->macs_per_pe, (unsigned long long)cfg->lrm_bytes, (unsigned long long)cfg->ocm_bytes);
	fprintf(f, "// %d kernels, %llu MACs; weights.bin %llu B; OCM peak %llu B; DDR arena %llu B; %d spills\n",
	        cm->nk, (unsigned long long)macs, (unsigned long long)cm->weights_bytes,
	        (unsigned long long)cm->ocm_peak, (unsigned long long)cm->ddr_bytes, cm->nspills);
	fputs("#include \"ccl.hpp\"\n", f);

	for (int i = 0; i < cm->nk; i++) {
		ChKernel *k = &cm->k[i];
		Node *n = k->n;
		fprintf(f, "\n// k%d ", i);
		comment_str(f, ch_node_label(n));
		fprintf(f, ": %s;", ch_op_name(cm->a, n));
		values_comment(f, " in ", n->inputs, n->ninputs);
		values_comment(f, "; out ", n->outputs, n->noutputs);
		fprintf(f, "; split %s %lld over %d core%s\n", k->split, (long long)k->units, k->ncores,
		        k->ncores == 1 ? "" : "s");
		fprintf(f, "static void k%d(ccl::Ctx &c)\n{\n", i);
		emit_dmas(f, cm, k, 0);
		fputc('\t', f);
		const char *in[16], *out[8], *blob[8];
		for (int j = 0; j < n->ninputs; j++)
			in[j] = k->in_expr[j];
		for (int j = 0; j < n->noutputs; j++)
			out[j] = k->out_expr[j];
		for (int b = 0; b < k->ki.nblobs; b++)
			blob[b] = k->blob_expr[b];
		if (ccl_emit_call(n, in, out, blob, k->scratch_expr, f, d) != WL_OK) {
			atomic_abort(&af);
			diag_prefix(d, "%s: ", cm->o->model_path);
			return WL_ERR;
		}
		emit_dmas(f, cm, k, 1);
		fputs("}\n", f);
	}

	int ni = emit_io_table(f, cm, "wl_inputs", g->inputs, g->ninputs);
	int no = emit_io_table(f, cm, "wl_outputs", g->outputs, g->noutputs);
	fputs("\nstatic const ccl::Kernel wl_kernels[] = {\n", f);
	for (int i = 0; i < cm->nk; i++) {
		fputs("\t{", f);
		cpp_str(f, ch_node_label(cm->k[i].n));
		fputs(", ", f);
		cpp_str(f, ch_op_name(cm->a, cm->k[i].n));
		fprintf(f, ", k%d, %lluull},\n", i, (unsigned long long)cm->k[i].ki.macs);
	}
	if (!cm->nk)
		fputs("\t{nullptr, nullptr, nullptr, 0ull},\n", f);
	fputs("};\n\nextern \"C\" const ccl::Program wl_program = {\n\t", f);
	cpp_str(f, mod);
	fputs(",\n\t{", f);
	cpp_str(f, cm->o->target_name ? cm->o->target_name : "qc-p");
	char clk[40], bw[40];
	fprintf(f, ", %d, %d, %d, %d, %lluull, %lluull, %s, %s},\n", cfg->cores, cfg->pe_rows, cfg->pe_cols,
	        cfg->macs_per_pe, (unsigned long long)cfg->lrm_bytes, (unsigned long long)cfg->ocm_bytes,
	        cpp_double(cfg->clock_hz, clk), cpp_double(cfg->ext_bw, bw));
	fprintf(f, "\t%lluull, %lluull, %lluull,\n", (unsigned long long)(cm->ocm_peak ? cm->ocm_peak : 64),
	        (unsigned long long)(cm->ddr_bytes ? cm->ddr_bytes : 64), (unsigned long long)cm->weights_bytes);
	fprintf(f, "\t%d, wl_inputs, %d, wl_outputs,\n\t%d, wl_kernels,\n};\n", ni, no, cm->nk);
	return atomic_commit(&af, d);
}

static int write_weights(ChModule *cm, const char *dir, Diag *d)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/weights.bin", dir);
	AtomicFile af;
	if (atomic_open(&af, path, d) != WL_OK)
		return WL_ERR;
	static const uint8_t zeros[64];
	uint64_t at = 0;
	for (int i = 0; i < cm->nk; i++) {
		ChKernel *k = &cm->k[i];
		for (int b = 0; b < k->ki.nblobs; b++) {
			WL_ASSERT(k->blob_woff[b] >= at && k->blob_woff[b] - at < 64);
			fwrite(zeros, 1, (size_t)(k->blob_woff[b] - at), af.f);
			at = k->blob_woff[b];
			if (k->ki.blobs[b].len)
				fwrite(k->ki.blobs[b].data, 1, k->ki.blobs[b].len, af.f);
			at += k->ki.blobs[b].len;
		}
	}
	WL_ASSERT(cm->weights_bytes >= at && cm->weights_bytes - at < 64);
	fwrite(zeros, 1, (size_t)(cm->weights_bytes - at), af.f);
	if (ferror(af.f)) {
		atomic_abort(&af);
		return diag_fail(d, "%s: write error", path);
	}
	return atomic_commit(&af, d);
}

_Static_assert((int)CH_MAX_CORES <= (int)SCHEDULE_MAX_CORES, "per_core entries fit a SchedKernel");

static const char *mem_json(int mem) { return mem == CH_MEM_OCM ? "ocm" : "ddr"; }

/* The Schedule of the lowered module (runtime/module/schedule.h); its arrays
 * live in the module's arena, its strings are the module's. */
static void fill_schedule(ChModule *cm, Schedule *s)
{
	Arena *a = cm->a;
	*s = (Schedule){.target = cm->o->target_name ? cm->o->target_name : "qc-p", .config = *cm->cfg,
	                .ocm_peak_bytes = cm->ocm_peak, .lrm_peak_bytes = cm->lrm_peak,
	                .ddr_bytes = cm->ddr_bytes, .weights_bytes = cm->weights_bytes};
	s->nspills = cm->nspills;
	s->spills = arena_alloc(a, (size_t)cm->nspills * sizeof *s->spills + 1);
	for (int i = 0; i < cm->nspills; i++)
		s->spills[i] = (SchedSpill){.value = cm->spills[i]->v->name, .bytes = cm->spills[i]->bytes,
		                            .reason = "does not fit in OCM"};
	s->nkernels = cm->nk;
	s->kernels = arena_alloc(a, (size_t)cm->nk * sizeof *s->kernels + 1);
	for (int i = 0; i < cm->nk; i++) {
		ChKernel *k = &cm->k[i];
		SchedKernel *sk = &s->kernels[i];
		sk->fn = arena_printf(a, "k%d", i);
		sk->name = ch_node_label(k->n);
		sk->op = ch_op_name(a, k->n);
		sk->cpp = k->ki.cpp_name ? k->ki.cpp_name : "";
		sk->split = k->split;
		sk->ncores = k->ncores;
		sk->cores = arena_alloc(a, (size_t)k->ncores * sizeof *sk->cores + 1);
		for (int c = 0; c < k->ncores; c++)
			sk->cores[c] = c;
		sk->macs = k->ki.macs;
		sk->alu_ops = k->ki.alu_ops;
		sk->has_tile = true;
		sk->tile = (SchedTile){.m = k->tile_m, .n = k->tile_n, .k = k->tile_k, .count = k->tile_count,
		                       .lrm_bytes = k->tile_lrm, .double_buffered = true};
		sk->nbuffers = k->nbuf;
		sk->buffers = arena_alloc(a, (size_t)k->nbuf * sizeof *sk->buffers + 1);
		for (int b = 0; b < k->nbuf; b++) {
			const ChBuf *cb = &k->buf[b];
			sk->buffers[b] = (SchedBuffer){.value = cb->value, .role = cb->role,
			                               .mem = cb->mem == CH_MEM_W ? "ddr" : mem_json(cb->mem),
			                               .in_place = cb->mem == CH_MEM_W ? "weights.bin" : NULL,
			                               .offset = cb->off, .bytes = cb->bytes};
		}
		/* the DMA of module.cpp, then the OCM <-> LRM streams of the tiling
		 * (not emulated byte by byte) */
		sk->dma = arena_alloc(a, (size_t)(k->ndma + 2) * sizeof *sk->dma);
		for (int j = 0; j < k->ndma; j++)
			sk->dma[sk->ndma++] = (SchedDma){.dir = k->dma[j].dir == 0 ? SCHED_DDR_TO_OCM : SCHED_OCM_TO_DDR,
			                                 .bytes = k->dma[j].bytes, .what = k->dma[j].what};
		uint64_t rd = 0, wr = 0;
		for (int c = 0; c < k->ncores; c++) {
			rd += k->core[c].ocm_read;
			wr += k->core[c].ocm_write;
		}
		sk->dma[sk->ndma++] = (SchedDma){.dir = SCHED_OCM_TO_LRM, .bytes = rd, .what = "activations"};
		sk->dma[sk->ndma++] = (SchedDma){.dir = SCHED_LRM_TO_OCM, .bytes = wr, .what = "activations"};
		sk->nper_core = k->ncores;
		for (int c = 0; c < k->ncores; c++)
			sk->per_core[c] = k->core[c];
	}
}

static int write_schedule(ChModule *cm, const char *dir, Diag *d)
{
	Schedule s;
	fill_schedule(cm, &s);
	char path[4096];
	snprintf(path, sizeof path, "%s/schedule.json", dir);
	return schedule_write(path, &s, d);
}

int ch_emit(ChModule *cm, const char *dir, Diag *d)
{
	if (write_module_cpp(cm, dir, d) != WL_OK || write_weights(cm, dir, d) != WL_OK ||
	    write_schedule(cm, dir, d) != WL_OK)
		return WL_ERR;
	return WL_OK;
}
