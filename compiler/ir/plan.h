/* plan.h — buffer planning by liveness (compiler/ir/plan.c), shared by the
 * three planners: the reference executor's activation arena
 * (runtime/interp/exec.c), the host module's workspace (targets/host/host.c)
 * and the Chimera OCM (targets/chimera/alloc.c).
 *
 * Liveness. Times are node indices in the graph's list order (0..nnodes-1).
 * plan_liveness gives every value id its interval [def, last]: def is the
 * producing node (-1: graph input, initializer, outer value), last the last
 * node reading it; a value produced and never read has last = def, a value
 * neither produced nor read last = -1. Intervals are inclusive: a node's
 * outputs are alive while its inputs are (they share the time def), so a
 * node never writes over what it reads. What a user adds (graph outputs
 * alive to the end, blocks alive for one node only) is its own policy.
 *
 * Placement. A block is a size and an interval [first, last]. plan_place puts
 * blocks one at a time, in the caller's order, each at the LOWEST offset
 * (a multiple of align) where it overlaps no already placed block whose
 * interval meets its own — greedy first fit over the offset axis, with the
 * conflicts restricted to blocks alive at the same time:
 *
 *     conflicts = placed blocks b with b.first <= last && first <= b.last,
 *                 sorted by offset
 *     at = 0
 *     for b in conflicts:
 *         if b.off >= at + size: break                  (the gap fits)
 *         if b.off + b.size > at: at = align_up(b.off + b.size)
 *     refuse if at + size > capacity, else place at `at`
 *
 * The result is the lowest feasible offset, so it does not depend on the
 * order of equal-offset conflicts, nor on whether a caller thinks of it as
 * "allocate at node i, free after node last" (online: host, Chimera) or as
 * intervals placed in some order (offline: the executor, largest first, the
 * greedy-by-size heuristic of TFLite's arena planner). The knobs:
 *   align          offsets are multiples of it and sizes are rounded up to it
 *                  (a power of two);
 *   empty_is_unit  a 0-byte request takes one align unit (else 0 bytes: it
 *                  lands at offset 0 and occupies nothing);
 *   capacity       a block must end at or below it, else plan_place refuses
 *                  it (returns false; it occupies nothing) and counts it in
 *                  nrefused — the caller spills it (PLAN_UNBOUNDED: never);
 *   in_order       the caller promises nondecreasing `first` (asserted): blocks
 *                  that ended before it are forgotten, so a request costs
 *                  O(blocks alive) instead of O(blocks placed);
 *   order          (plan_place_all) PLAN_IN_ORDER, or PLAN_LARGEST_FIRST
 *                  (rounded size descending, ties by index).
 * peak is the highest end of any placed block (the arena size).
 *
 * The users and their knobs (all align 64):
 *   exec.c   node outputs [def, last], graph outputs to nnodes; plan_place_all
 *            PLAN_LARGEST_FIRST; empty blocks take nothing; unbounded.
 *   host.c   node order: each output [def, last], then the node's scratch
 *            [i, i]; empty_is_unit, in_order; unbounded; peak = workspace.
 *   alloc.c  kernel order: staged weights, fills, output staging, scratch
 *            [i, i]; activations and a module input kept for later readers
 *            [i, last]; empty_is_unit, in_order; capacity --ocm (a refusal
 *            is a spill to DDR). */
#ifndef WLOWER_PLAN_H
#define WLOWER_PLAN_H

#include "compiler/ir/ir.h"

typedef struct PlanLive { int def, last; } PlanLive;
/* Intervals of the value ids 0..nvals-1 over g's nodes (ids outside that
 * range are skipped); a malloc'ed array of nvals entries. */
PlanLive *plan_liveness(const Graph *g, int nvals);

#define PLAN_UNBOUNDED UINT64_MAX

typedef struct PlanBlock { uint64_t off, size; int first, last; } PlanBlock;

typedef struct Planner {
	/* policy: set by plan_init, then adjust empty_is_unit / in_order */
	uint64_t align, capacity;
	bool empty_is_unit, in_order;
	/* results */
	uint64_t peak;
	int nplaced, nrefused;
	/* private */
	PlanBlock *b, *tmp; int n, cap;
	int front;
} Planner;

void plan_init(Planner *p, uint64_t align, uint64_t capacity);
void plan_fini(Planner *p);
/* The size a request of `bytes` takes (rounded to align; empty_is_unit). */
uint64_t plan_size(const Planner *p, uint64_t bytes);
/* Places a block of `bytes` alive over [first, last] (first <= last); true
 * and *off, or false when it does not fit under the capacity. */
bool plan_place(Planner *p, uint64_t bytes, int first, int last, uint64_t *off);

enum { PLAN_IN_ORDER, PLAN_LARGEST_FIRST };
typedef struct PlanItem {
	uint64_t bytes; int first, last;   /* in */
	uint64_t off; bool placed;         /* out */
} PlanItem;
/* Places every item, in the given order (PLAN_*). */
void plan_place_all(Planner *p, PlanItem *items, int n, int order);

#endif
