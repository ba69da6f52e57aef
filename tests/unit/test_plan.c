/* test_plan.c — the shared buffer planner (compiler/ir/plan.h): liveness on
 * a small graph, placements worked out by hand, the knobs (alignment, empty
 * blocks, capacity and refusals, in_order forgetting, largest first), and
 * random interval sets checked against two oracles: a brute-force lowest
 * feasible offset, and an online allocator (allocate at `first`, free after
 * `last`: how the host and Chimera planners were written before). */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "compiler/ir/plan.h"
#include "compiler/onnx/onnx.h"
#include "check_run.h"

static Module *parse(const char *src)
{
	Module *m = NULL;
	Diag d = {0};
	ck_assert_msg(text_parse(src, strlen(src), "t.onnxtxt", &m, &d) == WL_OK, "%s", d.msg);
	return m;
}

static int vid(Module *m, const char *name)
{
	Value *v = graph_find(m->graph, name);
	ck_assert_ptr_nonnull(v);
	return v->id;
}

START_TEST(liveness)
{
	Module *m = parse("<ir_version: 8, opset_import: [\"\" : 17]>\n"
	                  "g (float[4] x) => (float[4] y) <float[4] w = {1, 2, 3, 4}> {\n"
	                  "  a = Add(x, w)\n"          /* node 0 */
	                  "  b = Relu(a)\n"            /* node 1 */
	                  "  u = Neg(a)\n"             /* node 2: u never read */
	                  "  c = Mul(b, b)\n"          /* node 3 */
	                  "  y = Add(c, a)\n"          /* node 4 */
	                  "}\n");
	PlanLive *lv = plan_liveness(m->graph, m->next_value_id);
	int x = vid(m, "x"), w = vid(m, "w"), a = vid(m, "a"), b = vid(m, "b"), u = vid(m, "u"),
	    c = vid(m, "c"), y = vid(m, "y");
	ck_assert_int_eq(lv[x].def, -1); ck_assert_int_eq(lv[x].last, 0);
	ck_assert_int_eq(lv[w].def, -1); ck_assert_int_eq(lv[w].last, 0);
	ck_assert_int_eq(lv[a].def, 0); ck_assert_int_eq(lv[a].last, 4);
	ck_assert_int_eq(lv[b].def, 1); ck_assert_int_eq(lv[b].last, 3);
	ck_assert_int_eq(lv[u].def, 2); ck_assert_int_eq(lv[u].last, 2);   /* never read: last = def */
	ck_assert_int_eq(lv[c].def, 3); ck_assert_int_eq(lv[c].last, 4);
	ck_assert_int_eq(lv[y].def, 4); ck_assert_int_eq(lv[y].last, 4);   /* graph outputs: the user's policy */
	/* ids outside nvals are skipped */
	PlanLive *few = plan_liveness(m->graph, 1);
	free(few);
	free(lv);
	module_free(m);
}
END_TEST

START_TEST(by_hand)
{
	Planner p;
	plan_init(&p, 64, PLAN_UNBOUNDED);
	uint64_t off;
	/* A [0,2] 100 B (128) at 0; B [1,1] 64 meets A → 128; C [2,3] 64 meets A,
	 * not B → 128; D [3,3] 200 (256) meets only C (128..192): 0..128 is too
	 * small → 192. */
	ck_assert(plan_place(&p, 100, 0, 2, &off)); ck_assert_uint_eq(off, 0);
	ck_assert(plan_place(&p, 64, 1, 1, &off)); ck_assert_uint_eq(off, 128);
	ck_assert(plan_place(&p, 64, 2, 3, &off)); ck_assert_uint_eq(off, 128);
	ck_assert(plan_place(&p, 200, 3, 3, &off)); ck_assert_uint_eq(off, 192);
	/* E [3,5] 128: the gap 0..128 before C is free at time 3 */
	ck_assert(plan_place(&p, 128, 3, 5, &off)); ck_assert_uint_eq(off, 0);
	ck_assert_uint_eq(p.peak, 192 + 256);
	ck_assert_int_eq(p.nplaced, 5);
	/* empty blocks take nothing unless empty_is_unit */
	ck_assert(plan_place(&p, 0, 3, 3, &off)); ck_assert_uint_eq(off, 0);
	ck_assert_uint_eq(plan_size(&p, 0), 0);
	p.empty_is_unit = true;
	ck_assert_uint_eq(plan_size(&p, 0), 64);
	ck_assert_uint_eq(plan_size(&p, 65), 128);
	plan_fini(&p);
}
END_TEST

START_TEST(capacity)
{
	Planner p;
	plan_init(&p, 64, 256);
	p.empty_is_unit = true;
	p.in_order = true;
	uint64_t off = 7;
	ck_assert(plan_place(&p, 128, 0, 3, &off)); ck_assert_uint_eq(off, 0);
	ck_assert(plan_place(&p, 64, 0, 0, &off)); ck_assert_uint_eq(off, 128);
	/* 128 more at time 0: only 64 left → refused, takes nothing */
	off = 7;
	ck_assert(!plan_place(&p, 128, 0, 1, &off)); ck_assert_uint_eq(off, 7);
	ck_assert(plan_place(&p, 64, 0, 1, &off)); ck_assert_uint_eq(off, 192);
	/* time 1: the [0,0] block at 128 is gone */
	ck_assert(plan_place(&p, 1, 1, 1, &off)); ck_assert_uint_eq(off, 128);
	/* exactly the capacity fits once the first block ends */
	ck_assert(!plan_place(&p, 256, 2, 2, &off));
	ck_assert(plan_place(&p, 256, 4, 4, &off)); ck_assert_uint_eq(off, 0);
	ck_assert(!plan_place(&p, 257, 5, 5, &off));
	ck_assert_int_eq(p.nrefused, 3);
	ck_assert_int_eq(p.nplaced, 5);
	ck_assert_uint_eq(p.peak, 256);
	plan_fini(&p);
}
END_TEST

START_TEST(largest_first)
{
	/* a 64 [0,1], b 256 [1,2], c 128 [2,3], d 100 [4,4], e 128 [4,4].
	 * Largest first: b at 0, c (meets b) at 256, d at 0, e (meets d) at 128,
	 * a (meets b) at 256; d and e both take 128 bytes: index order. */
	PlanItem it[5] = {{.bytes = 64, .first = 0, .last = 1}, {.bytes = 256, .first = 1, .last = 2},
	                  {.bytes = 128, .first = 2, .last = 3}, {.bytes = 100, .first = 4, .last = 4},
	                  {.bytes = 128, .first = 4, .last = 4}};
	Planner p;
	plan_init(&p, 64, PLAN_UNBOUNDED);
	plan_place_all(&p, it, 5, PLAN_LARGEST_FIRST);
	ck_assert_uint_eq(it[1].off, 0);
	ck_assert_uint_eq(it[2].off, 256);
	ck_assert_uint_eq(it[0].off, 256);
	ck_assert_uint_eq(it[3].off, 0);      /* d before e: same rounded size, lower index */
	ck_assert_uint_eq(it[4].off, 128);
	ck_assert_uint_eq(p.peak, 384);
	plan_fini(&p);
	plan_init(&p, 64, PLAN_UNBOUNDED);
	plan_place_all(&p, it, 5, PLAN_IN_ORDER);
	ck_assert_uint_eq(it[0].off, 0);
	ck_assert_uint_eq(it[1].off, 64);
	ck_assert_uint_eq(it[2].off, 320);    /* b at 64..320 is alive at time 2; a ended */
	ck_assert_uint_eq(it[3].off, 0);
	ck_assert_uint_eq(it[4].off, 128);
	plan_fini(&p);
}
END_TEST

/* ------------------------------------------------------------ random sets */

typedef struct Req { uint64_t bytes; int first, last; } Req;

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Requests in nondecreasing first; sizes 0..300, some empty. */
static int make_reqs(uint64_t *seed, Req *r, int max)
{
	int n = 0, t = 0;
	while (n < max) {
		t += (int)(rnd(seed) % 2);
		int k = 1 + (int)(rnd(seed) % 3);
		for (int j = 0; j < k && n < max; j++) {
			uint64_t b = rnd(seed) % 8 == 0 ? 0 : rnd(seed) % 300;
			r[n++] = (Req){b, t, t + (int)(rnd(seed) % 6)};
		}
	}
	return n;
}

/* Brute force: the lowest multiple of a that overlaps no placed block alive at the same time. */
static uint64_t brute(const Req *r, const uint64_t *off, const bool *ok, int i, uint64_t size, uint64_t a,
                      const uint64_t *sz)
{
	for (uint64_t at = 0;; at += a) {
		bool clash = false;
		for (int j = 0; j < i && !clash; j++)
			if (ok[j] && r[j].first <= r[i].last && r[i].first <= r[j].last &&
			    at < off[j] + sz[j] && off[j] < at + size)
				clash = true;
		if (!clash)
			return at;
	}
}

START_TEST(random_vs_brute_force)
{
	enum { N = 120 };
	uint64_t seed = 0x9e3779b97f4a7c15ull + (uint64_t)_i;
	Req r[N];
	uint64_t off[N], sz[N];
	bool ok[N];
	for (int round = 0; round < 40; round++) {
		int n = make_reqs(&seed, r, N);
		uint64_t cap = round % 2 ? 1024 : PLAN_UNBOUNDED;
		Planner p, q;
		plan_init(&p, 64, cap);
		plan_init(&q, 64, cap);
		p.empty_is_unit = q.empty_is_unit = round % 4 < 2;
		q.in_order = true;                     /* forgetting ended blocks changes nothing */
		for (int i = 0; i < n; i++) {
			sz[i] = plan_size(&p, r[i].bytes);
			uint64_t want = brute(r, off, ok, i, sz[i], 64, sz), o2 = 0;
			ok[i] = plan_place(&p, r[i].bytes, r[i].first, r[i].last, &off[i]);
			bool ok2 = plan_place(&q, r[i].bytes, r[i].first, r[i].last, &o2);
			ck_assert_int_eq(ok[i], want + sz[i] <= cap);
			ck_assert_int_eq(ok2, ok[i]);
			if (ok[i]) {
				ck_assert_uint_eq(off[i], want);
				ck_assert_uint_eq(o2, want);
			}
		}
		ck_assert_uint_eq(p.peak, q.peak);
		ck_assert_int_eq(p.nrefused, q.nrefused);
		plan_fini(&p);
		plan_fini(&q);
	}
}
END_TEST

/* The online view: at time t, allocate the blocks starting at t (first fit
 * over the blocks not yet freed, sorted by offset); after t, free those whose
 * last is t. */
START_TEST(random_vs_online)
{
	enum { N = 200 };
	uint64_t seed = 0x2545f4914f6cdd1dull + (uint64_t)_i;
	Req r[N];
	for (int round = 0; round < 40; round++) {
		int n = make_reqs(&seed, r, N);
		uint64_t cap = round % 2 ? 2048 : PLAN_UNBOUNDED, peak = 0;
		Planner p;
		plan_init(&p, 64, cap);
		p.empty_is_unit = true;
		p.in_order = true;
		struct { uint64_t off, size; int last; } live[N];
		int nlive = 0;
		for (int i = 0; i < n; i++) {
			if (i > 0 && r[i].first > r[i - 1].first) {
				int k = 0;                     /* free what ended before first */
				for (int j = 0; j < nlive; j++)
					if (live[j].last >= r[i].first)
						live[k++] = live[j];
				nlive = k;
			}
			/* sort live by offset (insertion), then first fit */
			for (int a = 1; a < nlive; a++)
				for (int b = a; b > 0 && live[b - 1].off > live[b].off; b--) {
					__typeof__(live[0]) t = live[b];
					live[b] = live[b - 1];
					live[b - 1] = t;
				}
			uint64_t size = plan_size(&p, r[i].bytes), at = 0;
			for (int j = 0; j < nlive; j++) {
				if (live[j].off >= at + size)
					break;
				at = live[j].off + live[j].size;
			}
			bool want = at + size <= cap;
			uint64_t got = 0;
			ck_assert_int_eq(plan_place(&p, r[i].bytes, r[i].first, r[i].last, &got), want);
			if (want) {
				ck_assert_uint_eq(got, at);
				live[nlive].off = at;
				live[nlive].size = size;
				live[nlive++].last = r[i].last;
				if (at + size > peak)
					peak = at + size;
			}
		}
		ck_assert_uint_eq(p.peak, peak);
		plan_fini(&p);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("plan");
	TCase *tc = tcase_create("plan");
	check_add(tc, (const TTest *const[]){liveness, by_hand, capacity, largest_first, NULL});
	tcase_add_loop_test(tc, random_vs_brute_force, 0, 4);
	tcase_add_loop_test(tc, random_vs_online, 0, 4);
	return check_run(s, tc);
}
