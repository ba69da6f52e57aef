/* cmd_compile.c — `wlower MODEL ...`: the compiler. It reads top to bottom
 * in compile(): read → passes (the table in passes/passes.c) → emit, and in
 * compile_target(): read → passes → a target writes the module directory.
 * Exit status: 0 success, 1 bad input (one line naming file, node, tensor),
 * 2 usage. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "compiler/driver/commands.h"
#include "runtime/interp/interp.h"
#include "targets/target.h"
#include "targets/host/hostgen.h"



static const char usage_main[] =
"usage: wlower MODEL [options]\n"
"       wlower COMMAND [args]      (run, calibrate, quantize, compare, sim, generate; see 'wlower COMMAND --help')\n"
"\n"
"Reads MODEL (.onnx binary, or .onnxtxt ONNX textual syntax), runs the pass\n"
"pipeline and writes the result.\n"
"\n"
"output:\n"
"  -o FILE               write the result to FILE (atomically: nothing is left on error);\n"
"                        -o - writes text to stdout\n"
"  --emit onnx|onnx-text format of the result; default: from -o's extension\n"
"                        (.onnx → onnx, else onnx-text); text goes to stdout without -o\n"
"  --print-weights       print every initializer in full (default: tensors with more than\n"
"                        16 elements print as a placeholder with dtype, shape and sha256)\n"
"  --external-data       with --emit onnx: store every initializer of 1 KiB or more in\n"
"                        FILE.data (tensors that were external stay external anyway;\n"
"                        models over 2 GiB always use it)\n"
"\n"
"pipeline:\n"
"  --passes=A,B,...      run exactly these passes or groups, in this order\n"
"  --stop-after=NAME     run the default pipeline up to and including NAME\n"
"  --print-after=NAME    print the IR after pass or group NAME (to stderr)\n"
"  --print-after-all     print the IR after every pass (to stderr)\n"
"  --time-passes         print the wall time of each pass (to stderr)\n"
"  --verify              run the IR verifier after every pass (always on in debug builds)\n"
"  --stats               print read / pass / write times and peak memory (to stderr)\n"
"  --list-passes         list the passes and groups, with their contracts\n"
"  --list-ops            the support matrix: every op and whether the reference\n"
"                        executor, the qc-* targets and the host target run it\n"
"\n"
"fusion (group 'fuse'):\n"
"  --prepend-logmel      the input becomes the waveform [1,480000]; an ai.wlower.LogMel\n"
"                        node computes Whisper's log-mel feeding the old input\n"
"  --append-argmax       logits outputs become int32 token ids (ai.wlower.GreedyArgMax)\n"
"  --fp16-attention      mark the attention-adjacent edges float16\n"
"  --static-kv-cache     GroupQueryAttention nodes whose past K/V are graph inputs read\n"
"                        them in place and output only the new K/V rows (an LLM step,\n"
"                        or with --kv-step a Whisper step, against a static cache;\n"
"                        docs/OPS.md)\n"
"  --kv-cache int8       with --static-kv-cache: the static caches become int8 graph inputs\n"
"                        (DequantizeLinear before the attention) and the presents int8\n"
"                        outputs (QuantizeLinear), one symmetric scale per cache tensor:\n"
"                        max|x|/127 of the present's range in --kv-cache-ranges FILE\n"
"                        (tranges); --pipeline llm: the scales from --calibrate PROMPTS.txt\n"
"                        (any target) or FILE; float (the default) keeps float32\n"
"  --kv-cache-ranges FILE  the ranges of the present outputs (present.N.key/value)\n"
"  --split-lm-head body|head\n"
"                        body: the graph output computed as MatMulNBits(RMSNorm(h)) (the\n"
"                        final norm and LM head; int8: QMatMul(QuantizeLinear(RMSNorm(h))))\n"
"                        becomes h, named hidden_states; head: only\n"
"                        that norm and projection remain, with input hidden_states\n"
"  --absorb-cross-kv     attention of T queries over the K/V projections of S rows, read\n"
"                        by nothing else, with H*T well below D (a Whisper decoder_prefill's\n"
"                        cross-attention) reads the S rows themselves: the projections are\n"
"                        not computed (pass absorb-cross-kv; on by default with --target host)\n"
"  --position-input      a com.microsoft GroupQueryAttention (ONNX Runtime GenAI) whose\n"
"                        positions come from attention_mask (seqlens_k) reads them from\n"
"                        the graph input position_ids [B,S] instead, added if missing (what\n"
"                        --pipeline llm feeds: any S, past or not)\n"
"  --dim NAME=N          make the symbolic dim NAME static (repeatable), e.g. --dim\n"
"                        batch_size=1 --dim sequence_length=16 for an Optimum export;\n"
"                        dims written as sums of names (past_sequence_length +\n"
"                        sequence_length) follow; N may be 0 (--dim\n"
"                        past_sequence_length=0: a GenAI prompt's empty past)\n"
"  --max-seq N           the longest sequence the program sees: RoPE computed from\n"
"                        position_ids becomes a table of N rows (default 4096)\n"
"  --kv-step             a one-token decoder step (Whisper decoder_with_past) reads its\n"
"                        position (input position_ids [1]) and a key mask (input\n"
"                        attention_mask [1, P+1]) so one static-size cache serves every\n"
"                        position (passes kv-step-position, kv-step-mask)\n"
"  --from-prefill step|prefill|cross-kv\n"
"                        MODEL is a static-T Whisper prefill without cache (the vendor's\n"
"                        decoder_prefill.onnx: input_ids [1,T], encoder_hidden_states):\n"
"                        step: the one-token step with past K/V inputs [1,H,S-1,hd]\n"
"                        (S = --max-seq; with --kv-step --static-kv-cache the step of\n"
"                        --pipeline whisper); prefill: the T rows with the self-attention\n"
"                        presents as outputs and cross K/V as inputs; cross-kv: only every\n"
"                        layer's cross K/V (pass prefill-step)\n""\n"
"pipelines (several programs in one folder, run by 'wlower generate' or 'wlower transcribe'):\n"
"  --pipeline llm --target ref|host|qc-n|qc-p|qc-u -o PIPE_DIR\n"
"                        MODEL is an LLM folder (an Optimum export, or an ONNX Runtime\n"
"                        GenAI model-builder folder: genai_config.json); the KV-cached\n"
"                        prefill, step and lm_head programs into PIPE_DIR (hardware\n"
"                        options as below)\n"
"  --prefill-rows N      --pipeline llm: prompt rows per run of the prefill program\n"
"                        (default min(16, max_seq))\n"
"  --argmax-on-device    --pipeline llm: lm_head ends in the greedy argmax and outputs\n"
"                        the token id (int32 token_ids) instead of the logits; such a\n"
"                        pipeline decodes greedily only (no --temperature, --dump-logits)\n"
"  --pipeline whisper --target ref|host|qc-n|qc-p|qc-u -o PIPE_DIR\n"
"                        MODEL is a Whisper folder: Optimum layout (encoder_model,\n"
"                        decoder_model, decoder_with_past_model .onnx) or the vendor pair\n"
"                        encoder_model.onnx + decoder_prefill.onnx (static 4-token prefill,\n"
"                        no cache: step, cross_kv and prefill derived, --from-prefill); the\n"
"                        programs of 'wlower transcribe' (mel, encoder, cross_kv, step; the\n"
"                        vendor pair also prefill, not run by transcribe) into PIPE_DIR\n"
"                        (qc-*: every program but prefill on Chimera, with the ranges of\n"
"                        --calibrate AUDIO... or --tranges DIR)\n"
"  --precision fp32|fp32dec-lmq8\n"
"                        --pipeline whisper: fp32 (default), or fp32dec-lmq8 as the\n"
"                        reference export: encoder and decoder linears float, LM head\n"
"                        int8 per-output-channel weights with an int8 static input\n"
"                        (scale and zero point from the LM-head inputs of the --calibrate\n"
"                        clips, required on every target), token embedding int8 rowwise;\n"
"                        recorded in pipeline.json \"precision\"\n"
"  --calibrate PROMPTS.txt  llm, qc-*: ranges from float decoding (ref) from each prompt\n"
"                        (one a line, comma-separated ids) to max_seq: every tensor at every\n"
"                        position, the KV cache included; kept as PIPE_DIR/<program>.tranges;\n"
"                        with --kv-cache int8 (any target) also the cache scales: the new\n"
"                        K/V rows' ranges as PIPE_DIR/kv_cache.tranges\n"
"  --calibrate AUDIO     whisper, qc-* (repeatable: one clip each): the float pipeline\n"
"                        transcribes each clip (greedy, timestamps); every tensor of every\n"
"                        program at every window and decoding step is recorded (any target\n"
"                        with --precision fp32dec-lmq8: the LM head's inputs)\n"
"  --calibrate-margin M  widen those ranges M times (default 2: one guard bit; 1: as recorded):\n"
"                        later prompts go beyond a trace, and a saturated store at one\n"
"                        position corrupts the KV cache for every later one\n"
"  --tranges DIR         qc-* with --pipeline: DIR/<program>.tranges instead (e.g. an\n"
"                        earlier qc pipeline's folder); one of the two is required\n"
"\n"
"compilation to a target (writes the module directory DIR, atomically):\n"
"  --target qc-n|qc-p|qc-u|host -o DIR\n"
"                        qc-*: Chimera GPNPU (8x8, 16x16, 32x32 PEs): CCL C++ + schedule.json,\n"
"                        run with 'wlower sim DIR'; host: native module.so (LLVM), run\n"
"                        with 'wlower run DIR'\n"
"  --tranges FILE        calibration ranges (wlower calibrate); required for qc-*\n"
"  --print-fracbits      print the fractional-bits table (name, op, range, bits)\n"
"  --cores N             qc-*: cores 1..4 (default 4)\n"
"  --ocm SIZE            qc-*: on-chip memory per module, e.g. 32MB (default 16MB)\n"
"  --macs-per-pe N       qc-*: MACs per PE per cycle (default 16)\n"
"  --clock FREQ          qc-*: clock, e.g. 1.7GHz (default)\n"
"  --ext-bw BW           qc-*: external (DDR) bandwidth, e.g. 128GBps (default)\n"
"  --cpu NAME            host: CPU to tune for: native (default), x86-64-v3, skylake-avx512...\n"
"                        (--cpu help lists the names)\n"
"  --no-autotune         host: with --cpu native, take the blocking model's choice instead of\n"
"                        timing a few candidate blockings per MatMulNBits shape (cached in\n"
"                        ~/.cache/wlower/autotune.tsv; docs/host-contracts.md)\n"
"  --no-absorb-cross-kv  host: keep the K/V projections of a cross-attention (no\n"
"                        absorb-cross-kv; e.g. to compare)\n"
"  --host-precision P    host: fp32 (default), bf16 or auto (bf16 where the CPU has\n"
"                        AVX512-BF16, else fp32). bf16: MatMulNBits (4-bit and constant float\n"
"                        weights, the latter stored as bf16; a tied embedding table is read\n"
"                        from the head's bf16 copy), the attention's two products and\n"
"                        the conv stem multiply bf16 pairs (vdpbf16ps) into float sums: ~60 dB\n"
"                        vs fp32, and greedy ids may change where the top-2 logits are within\n"
"                        ~0.1; an error if the CPU lacks AVX512-BF16\n"
"  --threads N           host: default thread count recorded in the manifest (0 = all cores)\n"
"  --emit llvm-ir        host: also write DIR/module.ll (the optimized LLVM IR)\n"
"  --pipeline KIND       with --target ref|host: compile the programs of a KV-cached loop\n"
"                        into the pipeline directory DIR: llm (an Optimum LLM export or an\n"
"                        ONNX Runtime GenAI folder; run\n"
"                        with 'wlower generate') or whisper (an Optimum Whisper export:\n"
"                        mel, encoder, cross_kv, step; run with 'wlower transcribe')\n"
"\n"
"  -h, --help            this help\n"
"  --version             print the version\n"
"\n"
"exit status: 0 success, 1 bad input, 2 usage error\n";

static int bad_input(const Diag *d)
{
	return cmd_error(NULL, d);
}

typedef struct Options {
	const char *model, *out, *emit, *tranges, *target, *cpu, *pipeline, *kv_cache, *precision;
	long cores, macs_per_pe, threads, prefill_rows;
	double ocm, clock, ext_bw, calibrate_margin;
	bool argmax_on_device;
	bool no_autotune;
	bool no_absorb_cross_kv;
	const char *host_precision;
	bool print_weights, external_data, list_passes, list_ops, stats, print_fracbits;
	OptList dims;                  /* --dim NAME=N, each occurrence */
	OptList calibrate;             /* --calibrate FILE, each occurrence */
	bool seen[48];                 /* per row of compile_opts: given */
	PipelineOptions pipe;
} Options;

#define O(f) offsetof(Options, f)
static const OptSpec compile_opts[] = {
	{"--output", "-o", OPT_STRING, O(out)},
	{"--emit", NULL, OPT_STRING, O(emit)},
	{"--passes", NULL, OPT_STRING, O(pipe.passes)},
	{"--stop-after", NULL, OPT_STRING, O(pipe.stop_after)},
	{"--print-after", NULL, OPT_STRING, O(pipe.print_after)},
	{"--tranges", NULL, OPT_STRING, O(tranges)},
	{"--target", NULL, OPT_STRING, O(target)},
	{"--print-after-all", NULL, OPT_FLAG, O(pipe.print_after_all)},
	{"--time-passes", NULL, OPT_FLAG, O(pipe.time_passes)},
	{"--verify", NULL, OPT_FLAG, O(pipe.verify_each)},
	{"--print-weights", NULL, OPT_FLAG, O(print_weights)},
	{"--external-data", NULL, OPT_FLAG, O(external_data)},
	{"--list-passes", NULL, OPT_FLAG, O(list_passes)},
	{"--list-ops", NULL, OPT_FLAG, O(list_ops)},
	{"--stats", NULL, OPT_FLAG, O(stats)},
	{"--print-fracbits", NULL, OPT_FLAG, O(print_fracbits)},
	{"--prepend-logmel", NULL, OPT_FLAG, O(pipe.fuse.prepend_logmel)},
	{"--append-argmax", NULL, OPT_FLAG, O(pipe.fuse.append_argmax)},
	{"--fp16-attention", NULL, OPT_FLAG, O(pipe.fuse.fp16_attention)},
	{"--static-kv-cache", NULL, OPT_FLAG, O(pipe.fuse.static_kv_cache)},
	{"--kv-cache", NULL, OPT_STRING, O(kv_cache)},
	{"--kv-cache-ranges", NULL, OPT_STRING, O(pipe.fuse.kv_cache_ranges)},
	{"--split-lm-head", NULL, OPT_STRING, O(pipe.fuse.split_lm_head)},
	{"--position-input", NULL, OPT_FLAG, O(pipe.fuse.position_input)},
	{"--absorb-cross-kv", NULL, OPT_FLAG, O(pipe.fuse.absorb_cross_kv)},
	{"--dim", NULL, OPT_LIST, O(dims)},
	{"--pipeline", NULL, OPT_STRING, O(pipeline)},
	{"--calibrate", NULL, OPT_LIST, O(calibrate)},
	{"--calibrate-margin", NULL, OPT_REAL, O(calibrate_margin), 1, 16, false, "%s: '%s' is not 1..16"},
	{"--kv-step", NULL, OPT_FLAG, O(pipe.canon.kv_step)},
	{"--from-prefill", NULL, OPT_STRING, O(pipe.canon.from_prefill)},
	{"--max-seq", NULL, OPT_INT, O(pipe.canon.max_seq), 1, 1 << 24, false, "%s: '%s' is not 1..16777216"},
	{"--prefill-rows", NULL, OPT_INT, O(prefill_rows), 1, 1 << 16, false, "%s: '%s' is not 1..65536"},
	{"--argmax-on-device", NULL, OPT_FLAG, O(argmax_on_device)},
	{"--precision", NULL, OPT_STRING, O(precision)},
	/* hardware (chimera_only, host_only below): need --target */
	{"--cores", NULL, OPT_INT, O(cores), 1, 4, false, "%s: '%s' is not 1..4"},
	{"--ocm", NULL, OPT_SIZE, O(ocm), 65536, 1e12, false, "%s: '%s' is not a size like 32MB (at least 64KB)"},
	{"--macs-per-pe", NULL, OPT_INT, O(macs_per_pe), 1, 1024, false, "%s: '%s' is not 1..1024"},
	{"--clock", NULL, OPT_FREQ, O(clock), 1e6, 1e12, false, "%s: '%s' is not a frequency like 1.7GHz"},
	{"--ext-bw", NULL, OPT_BANDWIDTH, O(ext_bw), 1e6, 1e15, false, "%s: '%s' is not a bandwidth like 128GBps"},
	{"--cpu", NULL, OPT_STRING, O(cpu)},
	{"--threads", NULL, OPT_INT, O(threads), 0, 1024, false, "%s: '%s' is not 0..1024"},
	{"--no-autotune", NULL, OPT_FLAG, O(no_autotune)},
	{"--no-absorb-cross-kv", NULL, OPT_FLAG, O(no_absorb_cross_kv)},
	{"--host-precision", NULL, OPT_STRING, O(host_precision)},
	OPT_END,
};
#undef O
_Static_assert(sizeof compile_opts / sizeof compile_opts[0] <= sizeof ((Options *)0)->seen,
               "Options.seen has a flag per row of compile_opts");

/* Whether option NAME was given. */
static bool given(const Options *o, const char *name)
{
	for (int k = 0; compile_opts[k].name; k++)
		if (strcmp(compile_opts[k].name, name) == 0)
			return o->seen[k];
	WL_ASSERT(!"no such option");
	return false;
}

/* The hardware options, by target; they need --target. */
static const char *const chimera_only[] = {"--cores", "--ocm", "--macs-per-pe", "--clock", "--ext-bw", NULL};
static const char *const host_only[] = {"--cpu", "--threads", "--no-autotune", "--host-precision",
                                        "--no-absorb-cross-kv", NULL};

/* The first option of list that was given, or NULL. */
static const char *first_given(const Options *o, const char *const *list)
{
	for (; *list; list++)
		if (given(o, *list))
			return *list;
	return NULL;
}

/* The support matrix: every op of the op table (compiler/ir/ops.def) and
 * whether the reference executor, the chimera targets and the host target
 * have a kernel for it. */
static void list_ops(void)
{
	printf("%-48s %-6s %-7s %s\n", "op (ops.def)", "interp", "chimera", "host");
	for (int i = 1; i < OP_COUNT_; i++) {
		const OpInfo *oi = &op_info[i];
		char name[128];
		snprintf(name, sizeof name, "%s%s%s", oi->domain[0] ? oi->domain : "", oi->domain[0] ? "." : "", oi->name);
		printf("%-48s %-6s %-7s %s\n", name, interp_op_supported((Op)i) ? "yes" : "-",
		       chimera_op_supported((Op)i) ? "yes" : "-", host_op_supported((Op)i) ? "yes" : "-");
	}
}

static void list_passes(void)
{
	printf("passes, in default pipeline order (group: pass):\n");
	for (int i = 0; i < pass_count; i++) {
		const Pass *p = &pass_table[i];
		printf("  %-14s %-26s %s\n", p->group ? p->group : "-", p->name, p->help);
		printf("  %-14s %-26s requires: %s; invalidates: %s\n", "", "", p->requires, p->invalidates);
	}
}

static long peak_rss_kb(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

static void print_stats(const Module *m, double t_read, long rss_read, double t_pass, double t_write)
{
	size_t mapped = 0;
	for (int i = 0; i < m->nmaps; i++)
		mapped += m->maps[i].len;
	fprintf(stderr, "stats: read %.1f ms (peak RSS %.1f MB after read), passes %.1f ms, write %.1f ms; "
	        "arena %.1f MB, mapped %.1f MB, peak RSS %.1f MB\n",
	        t_read, rss_read / 1e3, t_pass, t_write, arena_bytes(m->arena) / 1e6, mapped / 1e6,
	        peak_rss_kb() / 1e3);
}

/* --dim NAME=N (N in 0..2^31-1: 0 for an empty past; a name once) into o->pipe.canon. */
static int parse_dims(Options *o)
{
	if (!o->dims.n)
		return CMD_OK;
	DimBinding *b = calloc((size_t)o->dims.n, sizeof *b);
	if (!b)
		wl_die(__FILE__, __LINE__, "out of memory");
	o->pipe.canon.dims = b;
	for (int i = 0; i < o->dims.n; i++) {
		const char *arg = o->dims.v[i], *eq = strchr(arg, '=');
		char *end = NULL;
		long long v = eq ? strtoll(eq + 1, &end, 10) : 0;
		if (!eq || eq == arg || !eq[1] || *end || v < 0 || v > INT32_MAX)
			return cmd_usage(NULL, "--dim '%s': expected NAME=N with N in 0..2147483647", arg);
		char *name = strndup(arg, (size_t)(eq - arg));
		if (!name)
			wl_die(__FILE__, __LINE__, "out of memory");
		for (int k = 0; k < i; k++)
			if (strcmp(b[k].name, name) == 0) {
				free(name);
				return cmd_usage(NULL, "--dim %.*s given twice", (int)(eq - arg), arg);
			}
		b[i] = (DimBinding){name, v};
		o->pipe.canon.ndims = i + 1;
	}
	return CMD_OK;
}

/* The whole compiler, top to bottom. */
static int compile(Options *o)
{
	Diag d = {0};
	Module *m = NULL;
	PrintOptions po = {.print_weights = o->print_weights};
	o->pipe.print = po;

	double t0 = wl_now_ms();
	if (model_read(o->model, &m, &d) != WL_OK)
		return bad_input(&d);
	double t1 = wl_now_ms();
	long rss_read = peak_rss_kb();
	if (ir_verify(m, &d) != WL_OK) {
		module_free(m);
		return bad_input(&d);
	}
	if (pipeline_run(m, &o->pipe, &d) != WL_OK) {
		module_free(m);
		return bad_input(&d);
	}
	double t2 = wl_now_ms();
	int rc = WL_OK;
	if (strcmp(o->emit, "onnx") == 0) {
		ExportOptions eo = {.all_external = o->external_data};
		rc = onnx_export_file(m, o->out, &eo, &d);
	} else if (o->out && strcmp(o->out, "-") != 0) {
		rc = text_print_file(m, o->out, &po, &d);
	} else {
		rc = text_print(m, stdout, &po);
		if (rc == WL_OK && (fflush(stdout) != 0 || ferror(stdout)))
			rc = diag_fail(&d, "<stdout>: write failed");
	}
	if (o->stats)
		print_stats(m, t1 - t0, rss_read, t2 - t1, wl_now_ms() - t2);
	module_free(m);
	return rc == WL_OK ? 0 : bad_input(&d);
}

/* The TargetOptions of the command line (usage errors for options of the
 * other target, --emit, a missing -o or --tranges). */
static int target_options(Options *o, TargetKind kind, TargetOptions *out)
{
	bool chimera = kind != TARGET_HOST;
	const char *other = first_given(o, chimera ? host_only : chimera_only);
	if (other)
		return cmd_usage(NULL, "%s is an option of %s, not of --target %s", other,
		                 chimera ? "--target host" : "the qc-* targets", o->target);
	if (!chimera && o->cpu && !host_cpu_known(o->cpu))
		return cmd_usage(NULL, "--cpu: unknown CPU '%s' (64-bit x86; '--cpu help' lists them)", o->cpu);
	/* host: a cross-attention over projected rows reads the rows (absorb-cross-kv); the
	 * qc targets keep the projections (their tranges name those tensors) */
	if (!chimera && !o->no_absorb_cross_kv)
		o->pipe.fuse.absorb_cross_kv = true;
	TargetOptions to = {.kind = kind, .target_name = o->target, .model_path = o->model,
	                    .print_fracbits = o->print_fracbits,
	                    .fuse = o->pipe.fuse, .t_start_ms = wl_now_ms()};
	chimera_config_preset(chimera ? kind : TARGET_QC_P, &to.chimera);
	to.host.cpu = o->cpu ? o->cpu : "native";
	to.host.no_autotune = o->no_autotune;
	if (o->host_precision && strcmp(o->host_precision, "fp32") && strcmp(o->host_precision, "bf16") &&
	    strcmp(o->host_precision, "auto"))
		return cmd_usage(NULL, "--host-precision: '%s' is not fp32, bf16 or auto", o->host_precision);
	to.host.precision = o->host_precision ? o->host_precision : "fp32";
	if (given(o, "--cores"))
		to.chimera.cores = (int)o->cores;
	if (given(o, "--ocm"))
		to.chimera.ocm_bytes = (uint64_t)o->ocm;
	if (given(o, "--macs-per-pe"))
		to.chimera.macs_per_pe = (int)o->macs_per_pe;
	if (given(o, "--clock"))
		to.chimera.clock_hz = o->clock;
	if (given(o, "--ext-bw"))
		to.chimera.ext_bw = o->ext_bw;
	if (given(o, "--threads"))
		to.host.threads = (int)o->threads;
	if (o->emit) {
		if (kind != TARGET_HOST || strcmp(o->emit, "llvm-ir") != 0)
			return cmd_usage(NULL, "--emit %s: with --target, only '--emit llvm-ir' (host) is accepted", o->emit);
		to.host.emit_llvm_ir = true;
	}
	if (!o->out)
		return cmd_usage(NULL, "--target %s needs -o DIR", o->target);
	if (o->calibrate.n && !o->pipeline)
		return cmd_usage(NULL, "%s", "--calibrate goes with --pipeline llm|whisper (a plain model: 'wlower calibrate')");
	if (chimera && !o->tranges && !o->pipeline)
		return cmd_usage(NULL, "--target %s needs --tranges FILE (from 'wlower calibrate')", o->target);
	if (!chimera && (o->tranges || o->print_fracbits))
		return cmd_usage(NULL, "%s", "--tranges and --print-fracbits are for the qc-* targets (the host runs float)");
	if (o->pipe.passes || o->pipe.stop_after)
		return cmd_usage(NULL, "%s", "--passes/--stop-after cannot be combined with --target");
	if (chimera) {
		o->pipe.numerics.tranges_path = o->pipeline ? NULL : o->tranges;   /* pipelines: per program */
		o->pipe.numerics.print_fracbits = o->print_fracbits;
	}
	/* the passes the manifest lists: the default pipeline (numerics for qc-* only) */
	static const char *names[256];
	int nn = 0;
	for (int i = 0; i < pass_count && nn < 256; i++)
		if (chimera || !pass_table[i].group || strcmp(pass_table[i].group, "numerics") != 0)
			names[nn++] = pass_table[i].name;
	to.passes_run = names;
	to.npasses_run = nn;
	*out = to;
	return CMD_OK;
}

static int compile_target(Options *o, TargetKind kind)
{
	TargetOptions to;
	int urc = target_options(o, kind, &to);
	if (urc != CMD_OK)
		return urc;
	bool chimera = kind != TARGET_HOST;
	if (o->pipeline) {
		PipelineArgs pa = {.src = o->model, .kind = o->pipeline, .target = o->target, .out = o->out,
		                   .to = &to, .pipe = &o->pipe, .calibrate = o->calibrate.v, .ncalibrate = o->calibrate.n, .tranges_dir = o->tranges,
		                   .calibrate_margin = o->calibrate_margin, .prefill_rows = o->prefill_rows,
		                   .argmax_on_device = o->argmax_on_device,
		                   .kv_cache_int8 = o->kv_cache && strcmp(o->kv_cache, "int8") == 0};
		Lmq8Calib lc = {0};
		pa.lmq8 = o->precision && strcmp(o->precision, "fp32dec-lmq8") == 0 ? &lc : NULL;
		return cmd_compile_pipeline(&pa);
	}

	Diag d = {0};
	Module *m = NULL;
	if (model_read(o->model, &m, &d) != WL_OK)
		return bad_input(&d);
	if (ir_verify(m, &d) != WL_OK || pipeline_run(m, &o->pipe, &d) != WL_OK) {
		module_free(m);
		return bad_input(&d);
	}

	char *tmp = NULL;
	int rc = outdir_begin(o->out, &tmp, &d);
	if (rc == WL_OK) {
		rc = chimera ? chimera_compile(m, &to, tmp, &d) : host_compile(m, &to, tmp, &d);
		if (rc == WL_OK)
			rc = outdir_commit(tmp, o->out, module_dir_replaceable, &d);
		if (rc != WL_OK)
			outdir_abort(tmp);
	}
	free(tmp);
	if (o->stats)
		print_stats(m, 0, peak_rss_kb(), 0, wl_now_ms() - to.t_start_ms);
	module_free(m);
	if (rc != WL_OK)
		return bad_input(&d);
	fprintf(stderr, "wlower: compiled %s for %s in %.0f ms -> %s\n", o->model, o->target,
	        wl_now_ms() - to.t_start_ms, o->out);
	return 0;
}

static int dispatch(Options *o);

int cmd_compile(int argc, char **argv)
{
	if (argc < 2) {
		fputs(usage_main, stderr);
		return CMD_USAGE;
	}
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(usage_main, stdout);
			return 0;
		}
		if (strcmp(argv[i], "--version") == 0) {
			printf("wlower %s\n", WLOWER_VERSION);
			return 0;
		}
	}
	Options o = {0};
	int rc = opt_parse(NULL, compile_opts, argc, argv, &o, &o.model, "model", o.seen);
	if (rc == CMD_OK)
		rc = parse_dims(&o);
	if (rc == CMD_OK)
		rc = dispatch(&o);
	for (int i = 0; i < o.pipe.canon.ndims; i++)
		free((char *)o.pipe.canon.dims[i].name);
	free((DimBinding *)o.pipe.canon.dims);
	opt_free_lists(compile_opts, &o);
	return rc;
}

/* After parsing: the listings, then compile to a file or to a target. */
static int dispatch(Options *o)
{
	if (o->list_passes) {
		list_passes();
		return 0;
	}
	if (o->list_ops) {
		list_ops();
		return 0;
	}
	if (o->cpu && strcmp(o->cpu, "help") == 0) {
		printf("--cpu names for --target host:\n");
		host_cpu_list(stdout);
		return 0;
	}
	if (!o->model)
		return cmd_usage(NULL, "%s", "no model given");
	if (given(o, "--calibrate-margin") && !o->calibrate.n)
		return cmd_usage(NULL, "%s", "--calibrate-margin goes with --calibrate");
	bool llm = o->pipeline && strcmp(o->pipeline, "llm") == 0;
	if (o->precision && strcmp(o->precision, "fp32") != 0 && strcmp(o->precision, "fp32dec-lmq8") != 0)
		return cmd_usage(NULL, "--precision: unknown precision '%s' (fp32, fp32dec-lmq8)", o->precision);
	if (o->precision && (!o->pipeline || strcmp(o->pipeline, "whisper") != 0))
		return cmd_usage(NULL, "%s", "--precision goes with --pipeline whisper");
	if (o->argmax_on_device && !llm)
		return cmd_usage(NULL, "%s", "--argmax-on-device goes with --pipeline llm");
	if (llm && o->pipe.fuse.append_argmax)
		return cmd_usage(NULL, "%s", "--append-argmax is for one model; with --pipeline llm, --argmax-on-device puts "
		                 "the greedy argmax in lm_head");
	bool kv8 = o->kv_cache && strcmp(o->kv_cache, "int8") == 0;
	if (o->kv_cache && !kv8 && strcmp(o->kv_cache, "float") != 0)
		return cmd_usage(NULL, "--kv-cache '%s': expected int8 or float", o->kv_cache);
	if (o->pipe.fuse.kv_cache_ranges && !kv8)
		return cmd_usage(NULL, "%s", "--kv-cache-ranges goes with --kv-cache int8");
	if (kv8 && o->pipeline && !llm)
		return cmd_usage(NULL, "%s", "--kv-cache int8 is for --pipeline llm (or one model with --static-kv-cache)");
	if (kv8 && !o->pipeline && (!o->pipe.fuse.static_kv_cache || !o->pipe.fuse.kv_cache_ranges))
		return cmd_usage(NULL, "%s", "--kv-cache int8 on one model needs --static-kv-cache and --kv-cache-ranges FILE");
	if (kv8 && llm && !o->calibrate.n && !o->pipe.fuse.kv_cache_ranges)
		return cmd_usage(NULL, "%s", "--pipeline llm --kv-cache int8 needs the cache scales: --calibrate PROMPTS.txt "
		                 "or --kv-cache-ranges FILE");
	if (o->pipeline && o->pipe.canon.from_prefill)
		return cmd_usage(NULL, "%s", "--from-prefill is for one model; --pipeline whisper applies it itself to a "
		                 "folder with decoder_prefill.onnx");
	if (o->pipeline && o->target && strcmp(o->target, "ref") == 0) {
		if (first_given(o, chimera_only) || first_given(o, host_only) || !o->out)
			return cmd_usage(NULL, "%s", "--target ref takes no hardware options and needs -o DIR");
		bool lmq8 = o->precision && strcmp(o->precision, "fp32dec-lmq8") == 0;
		if (o->tranges || (o->calibrate.n && !kv8 && !lmq8))
			return cmd_usage(NULL, "%s", "--calibrate and --tranges are for the qc-* targets (ref and host run float; "
			                 "--calibrate also gives the --kv-cache int8 scales and the fp32dec-lmq8 LM-head scale)");
		TargetOptions to = {.target_name = "ref", .model_path = o->model, .fuse = o->pipe.fuse,
		                    .t_start_ms = wl_now_ms()};
		Lmq8Calib lc = {0};
		PipelineArgs pa = {.src = o->model, .kind = o->pipeline, .target = "ref", .out = o->out, .ref = true,
		                   .to = &to, .pipe = &o->pipe, .prefill_rows = o->prefill_rows,
		                   .argmax_on_device = o->argmax_on_device, .kv_cache_int8 = kv8,
		                   .calibrate = o->calibrate.v, .ncalibrate = o->calibrate.n,
		                   .calibrate_margin = o->calibrate_margin, .lmq8 = lmq8 ? &lc : NULL};
		return cmd_compile_pipeline(&pa);
	}
	if (o->pipeline && !o->target)
		return cmd_usage(NULL, "%s", "--pipeline needs --target ref|host|qc-n|qc-p|qc-u and -o DIR");
	if (o->target) {
		TargetKind kind = target_parse(o->target);
		if (kind == TARGET_NONE)
			return cmd_usage(NULL, "--target: unknown target '%s' (qc-n, qc-p, qc-u, host)", o->target);
		return compile_target(o, kind);
	}
	if (first_given(o, chimera_only) || first_given(o, host_only))
		return cmd_usage(NULL, "%s", "the hardware options (--cores, --ocm, ..., --cpu, --threads) need --target");
	if (o->print_fracbits && !o->tranges)
		return cmd_usage(NULL, "%s", "--print-fracbits needs --tranges FILE");
	if (o->calibrate.n)
		return cmd_usage(NULL, "%s", "--calibrate goes with --pipeline llm|whisper --target qc-*");
	/* Without --target, --tranges runs the numerics group in the pipeline
	 * (e.g. --stop-after=assign-fracbits --print-fracbits to see the formats). */
	o->pipe.numerics.tranges_path = o->tranges;
	o->pipe.numerics.print_fracbits = o->print_fracbits;
	if (o->pipe.passes && o->pipe.stop_after)
		return cmd_usage(NULL, "%s", "--passes and --stop-after cannot be combined");
	if (!o->emit)
		o->emit = (o->out && str_ends_with(o->out, ".onnx")) ? "onnx" : "onnx-text";
	if (strcmp(o->emit, "onnx") != 0 && strcmp(o->emit, "onnx-text") != 0)
		return cmd_usage(NULL, "--emit: unknown format '%s' (onnx, onnx-text)", o->emit);
	if (strcmp(o->emit, "onnx") == 0 && (!o->out || strcmp(o->out, "-") == 0))
		return cmd_usage(NULL, "%s", "--emit onnx needs -o FILE");
	return compile(o);
}
