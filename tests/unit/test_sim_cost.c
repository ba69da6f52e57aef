/* test_sim_cost.c — the cost model of `wlower sim` (targets/chimera/sim/cost.c,
 * docs/cost-model.md): raw figures per category, tile utilization, shared
 * external bandwidth, DMA overlap, slowest core, totals. */
#include <check.h>
#include "check_run.h"
#include <math.h>
#include <string.h>
#include "targets/chimera/chimera.h"

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
	CostParams p = {.k = {1, 1, 1, 1, 1}, .act_ddr = 0, .kernel_overhead = 10};
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
	p.act_ddr = 0.5;
	cost_model(&c, &p, ks, 2, &r);
	ck_assert_double_eq_tol(r.cyc[1][1][CAT_DATA_EXTERNAL], 20 + 20, 1e-9);
	ck_assert_double_eq_tol(r.raw_module_act, 40, 1e-9);
	ck_assert_uint_eq(r.total_cycles, 110 + 80);
	cost_result_free(&r);
	/* the shipped constants are positive and finite */
	for (int t = 0; t < CAT_COUNT; t++)
		ck_assert(cost_default_params.k[t] > 0 && isfinite(cost_default_params.k[t]));
	ck_assert(cost_default_params.kernel_overhead >= 0);
	ck_assert(cost_default_params.act_ddr >= 0 && cost_default_params.act_ddr <= 2);
}
END_TEST

CHECK_MAIN("sim_cost", "cost",
	test_names, test_raw, test_overlap_and_totals)
