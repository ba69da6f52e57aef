/* test_sim_cost.c — the cost model of `wlower sim` (targets/chimera/sim/cost.c,
 * docs/cost-model.md): raw figures per category, tile utilization, shared
 * external bandwidth, DMA overlap, slowest core, totals, kernel classes, and
 * the shipped constants against the vendor's two profiles on our compilations
 * of the same networks (tests/data/cost/, docs/cost-model.md). */
#include <check.h>
#include "check_run.h"
#include <math.h>
#include <string.h>
#include "targets/chimera/chimera.h"
#include "targets/chimera/sim/sim.h"

static ChimeraConfig qcp(int cores)
{
	ChimeraConfig c;
	chimera_config_preset(TARGET_QC_P, &c);
	c.cores = cores;
	return c;
}

START_TEST(test_names)
{
	ck_assert_str_eq(cost_category_names[CAT_COMPUTE], "compute");
	ck_assert_str_eq(cost_category_names[CAT_MAC], "mac");
	ck_assert_str_eq(cost_category_names[CAT_DATA_ARRAY], "data_array");
	ck_assert_str_eq(cost_category_names[CAT_DATA_OCM], "data_ocm");
	ck_assert_str_eq(cost_category_names[CAT_DATA_EXTERNAL], "data_external");
}
END_TEST

START_TEST(test_raw)
{
	ChimeraConfig c = qcp(2);
	/* tiles: 1000 of 16·16·16 MAC slots = exactly the kernel's MACs */
	CostKernel k = {.tile_m = 16, .tile_n = 16, .tile_k = 16, .tile_count = 1000, .macs = 256 * 16 * 1000,
	                .ncores = 2};
	k.core[0] = (CostCoreCounts){.core = 0, .macs = 256 * 16 * 1000, .alu_ops = 256 * 7,
	                             .array_bytes = 4 * 480 * 10, .ocm_read = 64 * 3, .ocm_write = 64,
	                             .ext_read = 75294, .ext_write = 10};
	k.core[1] = (CostCoreCounts){.core = 1, .ext_write = 5};
	double raw[CAT_COUNT], act;
	cost_kernel_raw(&c, &k, 0, raw, &act);
	ck_assert_double_eq_tol(raw[CAT_COMPUTE], 7.0, 1e-9);          /* alu / 256 PEs */
	ck_assert_double_eq_tol(raw[CAT_MAC], 1000.0, 1e-9);           /* full tiles */
	ck_assert_double_eq_tol(raw[CAT_DATA_ARRAY], 10.0, 1e-9);      /* / (4 B · 480 links) */
	ck_assert_double_eq_tol(raw[CAT_DATA_OCM], 4.0, 1e-9);         /* / (4·16) */
	/* max(read, write) · 2 sharers / (128e9 / 1.7e9 B per cycle) */
	ck_assert_double_eq_tol(raw[CAT_DATA_EXTERNAL], 75294.0 * 2 / (128e9 / 1.7e9), 1e-6);
	/* padded edge tiles: 1600 tiles for the same MACs take 1.6 times as long */
	k.tile_count = 1600;
	ck_assert_double_eq_tol(cost_tile_util(&k), 1000.0 / 1600, 1e-12);
	cost_kernel_raw(&c, &k, 0, raw, &act);
	ck_assert_double_eq_tol(raw[CAT_MAC], 1600.0, 1e-9);
	/* utilization never exceeds 1; no tile: 1 */
	k.tile_count = 10;
	ck_assert_double_eq_tol(cost_tile_util(&k), 1.0, 0 + 1e-12);
	k.tile_count = 0;
	ck_assert_double_eq_tol(cost_tile_util(&k), 1.0, 1e-12);
	/* core 1 moves no input bytes: only its 5 written ones count */
	cost_kernel_raw(&c, &k, 1, raw, &act);
	ck_assert_double_eq_tol(raw[CAT_DATA_EXTERNAL], 5.0 * 2 / (128e9 / 1.7e9), 1e-9);
	ck_assert_double_eq_tol(raw[CAT_MAC], 0.0, 1e-12);
	ck_assert_double_eq_tol(act, 0.0, 1e-12);
	/* activations: the kernel's in+out bytes shared by its cores, all cores share DDR */
	k.act_bytes = 1000;
	cost_kernel_raw(&c, &k, 1, raw, &act);
	ck_assert_double_eq_tol(act, 500.0 * 2 / (128e9 / 1.7e9), 1e-9);
}
END_TEST

START_TEST(test_overlap_and_totals)
{
	ChimeraConfig c = qcp(2);
	c.ext_bw = c.clock_hz;    /* 1 byte per cycle */
	CostParams p = {.k = {1, 1, 1, 1, 1}, .k_mac_attn = 1, .kernel_overhead = 10, .overlap = true};
	CostKernel ks[2] = {0};
	/* kernel 0: double buffered, core 0 on-chip 100 cycles, DMA 50 (hidden);
	 * core 1 on-chip 40, DMA 50 → 50 */
	ks[0].double_buffered = true;
	ks[0].ncores = 2;
	ks[0].core[0] = (CostCoreCounts){.core = 0, .alu_ops = 256 * 100, .ext_read = 25};
	ks[0].core[1] = (CostCoreCounts){.core = 1, .alu_ops = 256 * 40, .ext_read = 25};
	/* kernel 1: not double buffered, core 1 only: 30 + 20 */
	ks[1].ncores = 1;
	ks[1].core[0] = (CostCoreCounts){.core = 1, .alu_ops = 256 * 30, .ext_write = 20};
	CostResult r;
	cost_model(&c, &p, ks, 2, &r);
	ck_assert_double_eq_tol(r.ktime[0][0], 100, 1e-9);
	ck_assert_double_eq_tol(r.ktime[0][1], 50, 1e-9);
	ck_assert_int_eq(r.critical[0], 0);
	ck_assert_double_eq_tol(r.kernel_cycles[0], 110, 1e-9);
	ck_assert_double_eq_tol(r.ktime[1][1], 50, 1e-9);
	ck_assert_double_eq_tol(r.ktime[1][0], 0, 1e-12);
	ck_assert_int_eq(r.critical[1], 1);
	ck_assert_uint_eq(r.total_cycles, 110 + 60);
	ck_assert_double_eq_tol(r.module_cat[CAT_COMPUTE], 100 + 30, 1e-9);
	ck_assert_double_eq_tol(r.module_cat[CAT_DATA_EXTERNAL], 50 + 20, 1e-9);
	ck_assert_double_eq_tol(r.core_busy[1], 100, 1e-9);
	ck_assert_double_eq_tol(r.core_cat[1][CAT_COMPUTE], 70, 1e-9);
	ck_assert_double_eq_tol(r.overhead_cycles, 20, 1e-9);
	cost_result_free(&r);
	/* act_ddr adds the activations' DDR time to data_external (and to the
	 * non-overlapped kernel 1): 40 act bytes on 1 core at 1 B/cycle, half of it */
	ks[1].act_bytes = 40;
	p.act_ddr[COST_ROWWISE] = 0.5;
	cost_model(&c, &p, ks, 2, &r);
	ck_assert_double_eq_tol(r.cyc[1][1][CAT_DATA_EXTERNAL], 20 + 20, 1e-9);
	ck_assert_double_eq_tol(r.raw_module_act, 40, 1e-9);
	ck_assert_uint_eq(r.total_cycles, 110 + 80);
	cost_result_free(&r);
	/* the other classes' shares do not apply to it (no cpp: row-wise) */
	p.act_ddr[COST_ROWWISE] = 0;
	p.act_ddr[COST_MATMUL] = p.act_ddr[COST_ATTENTION] = 0.5;
	cost_model(&c, &p, ks, 2, &r);
	ck_assert_uint_eq(r.total_cycles, 110 + 60);
	cost_result_free(&r);
	/* without overlap (v2) kernel 0's core 0 takes 100 + 50 */
	p.overlap = false;
	cost_model(&c, &p, ks, 2, &r);
	ck_assert_double_eq_tol(r.ktime[0][0], 150, 1e-9);
	ck_assert_uint_eq(r.total_cycles, 160 + 60);
	cost_result_free(&r);
	/* the shipped constants are positive and finite */
	for (int t = 0; t < CAT_COUNT; t++)
		ck_assert(cost_default_params.k[t] > 0 && isfinite(cost_default_params.k[t]));
	ck_assert(cost_default_params.k_mac_attn > 0 && cost_default_params.launch >= 0);
	ck_assert(cost_default_params.kernel_overhead >= 0);
	for (int k = 0; k < COST_CLASS_COUNT; k++)
		ck_assert(cost_default_params.act_ddr[k] >= 0 && cost_default_params.act_ddr[k] <= 2);
}
END_TEST

/* Kernel classes by "cpp"; launch per kernel and core into compute; the
 * attention MAC constant. */
START_TEST(test_classes_launch)
{
	ChimeraConfig c = qcp(2);
	CostKernel ks[3] = {0};
	char mm[] = "linalg::matMulNBits", at[] = "nn::whisperAttention", ln[] = "nn::layerNorm";
	ks[0].cpp = mm, ks[1].cpp = at, ks[2].cpp = ln;
	ck_assert_int_eq(cost_kernel_class(&ks[0]), COST_MATMUL);
	ck_assert_int_eq(cost_kernel_class(&ks[1]), COST_ATTENTION);
	ck_assert_int_eq(cost_kernel_class(&ks[2]), COST_ROWWISE);
	for (int i = 0; i < 3; i++) {
		ks[i].ncores = 2;
		ks[i].core[0] = (CostCoreCounts){.core = 0, .macs = 256 * 16 * 10};   /* 10 raw MAC cycles */
		ks[i].core[1] = (CostCoreCounts){.core = 1};
	}
	CostParams p = {.k = {1, 2, 1, 1, 1}, .k_mac_attn = 7, .launch = 100};
	CostResult r;
	cost_model(&c, &p, ks, 3, &r);
	ck_assert_double_eq_tol(r.cyc[0][0][CAT_MAC], 20, 1e-9);
	ck_assert_double_eq_tol(r.cyc[1][0][CAT_MAC], 70, 1e-9);
	ck_assert_double_eq_tol(r.cyc[2][0][CAT_MAC], 20, 1e-9);
	ck_assert_double_eq_tol(r.cyc[0][1][CAT_COMPUTE], 100, 1e-9);   /* the idle core launches too */
	ck_assert_double_eq_tol(r.launch_cycles, 300, 1e-9);
	ck_assert_uint_eq(r.total_cycles, 120 + 170 + 120);
	ck_assert_int_eq(r.class_kernels[COST_ATTENTION], 1);
	ck_assert_double_eq_tol(r.raw_class[COST_ATTENTION][CAT_MAC], 10, 1e-9);
	cost_result_free(&r);
}
END_TEST

/* The vendor's profiles (issue 13 and docs/DESIGN.md; not computed here) and
 * the shipped v2 constants on our compilations of the same networks
 * (tests/data/cost/{encoder,decoder}_qcp/schedule.json, made as docs/cost-model.md says):
 * every category within 25%, the total within 10%. v1 fails on the decoder. */
typedef struct Vendor { const char *dir; double total, cat[CAT_COUNT]; } Vendor;
static const Vendor vendor[] = {
	{"encoder_qcp", 43925705, {19.679e6, 6.154e6, 3.478e6, 11.834e6, 2.302e6}},
	{"decoder_qcp", 4297756, {1.907e6, 380016, 487555, 1.145e6, 372422}},
};

static double worst_category_error(const SimSchedule *s, const CostParams *p, const Vendor *v, double *total_err)
{
	CostResult r;
	cost_model(&s->cfg, p, s->k, s->nk, &r);
	double worst = 0;
	for (int t = 0; t < CAT_COUNT; t++) {
		double e = fabs(r.module_cat[t] / v->cat[t] - 1);
		if (e > worst)
			worst = e;
	}
	*total_err = fabs((double)r.total_cycles / v->total - 1);
	cost_result_free(&r);
	return worst;
}

START_TEST(test_vendor_points)
{
	const char *data = getenv("WLOWER_COST_DATA");
	ck_assert_msg(data != NULL, "WLOWER_COST_DATA (tests/data/cost) not set");
	double v1_worst = 0;
	for (int i = 0; i < 2; i++) {
		char dir[4096];
		snprintf(dir, sizeof dir, "%s/%s", data, vendor[i].dir);
		SimSchedule s;
		Diag d = {0};
		ck_assert_msg(sim_schedule_read(dir, &s, &d) == WL_OK, "%s: %s", dir, d.msg);
		ck_assert_str_eq(s.target, "qc-p");
		ck_assert_int_eq(s.cfg.cores, 4);
		ck_assert_uint_eq(s.cfg.ocm_bytes, 32u << 20);
		double tot, worst = worst_category_error(&s, &cost_default_params, &vendor[i], &tot);
		ck_assert_msg(worst <= 0.25, "%s: a category is %.1f%% off", vendor[i].dir, 100 * worst);
		ck_assert_msg(tot <= 0.10, "%s: TotalCycles %.1f%% off", vendor[i].dir, 100 * tot);
		double w1 = worst_category_error(&s, &cost_v1_params, &vendor[i], &tot);
		if (w1 > v1_worst)
			v1_worst = w1;
		sim_schedule_free(&s);
	}
	/* the structure v2 replaces: one constant per category cannot fit both */
	ck_assert_msg(v1_worst > 0.5, "v1 worst category error only %.1f%%", 100 * v1_worst);
}
END_TEST

CHECK_MAIN("sim_cost", "cost",
	test_names, test_raw, test_overlap_and_totals, test_classes_launch, test_vendor_points)
