/* threadpool.c — a small persistent pool for the reference kernels.
 *
 * threads-1 workers sleep on a condition variable; parallel_for publishes a
 * job (fn, ctx, n, chunk) under a new generation number, wakes them, and the
 * caller takes part as tid 0. Chunks are claimed with an atomic counter
 * (guided: each claim takes 1/(2·threads) of what is left, at least the
 * grain), so the split is dynamic but every index is visited exactly once.
 * Workers spin briefly before sleeping, because kernels tend to call
 * parallel_for back to back. A parallel_for issued from inside a job (or
 * while another thread owns the pool) runs inline on the calling thread with
 * that thread's tid.
 *
 * The caller never waits for a worker that has not joined the job: a worker
 * joins by incrementing `running` and then checking that the job is still
 * `open` (and its own); the caller closes the job once every chunk has been
 * claimed (it claims them itself when the workers are late) and then waits
 * only while running > 0. Either the worker sees the job closed and backs
 * off without touching it, or the caller sees it running (both seq_cst).
 * So on a loaded machine, where a woken worker may be descheduled for a
 * whole time slice, a small kernel costs the caller its own run time, not a
 * scheduler slice; the 2-thread host run of stories260K, ~60 small kernels
 * per token, was 28 tokens/s against 4,000 at 1 thread before this.
 *
 * Shared pools (threadpool_shared): every module and executor of a process
 * that asks for the same thread count gets the same pool (reference
 * counted), so a pipeline of several programs run one after the other has
 * threads-1 workers in all, not threads-1 per program still spinning after
 * their own program's last kernel while the next program runs on the same
 * cores. Two callers running modules at once on one pool do not
 * oversubscribe either: the second caller's parallel_for finds the owner
 * lock taken and runs inline.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "interp.h"

enum { SPIN_ITERS = 20000 };

struct ThreadPool {
	int n;                          /* threads, caller included */
	pthread_t *th;
	pthread_mutex_t mu;
	pthread_cond_t cv_start, cv_done;
	pthread_mutex_t owner;          /* held by the thread running a job */
	atomic_uint_fast64_t gen;       /* job generation */
	atomic_int running;             /* workers inside the current job */
	atomic_bool open;               /* the job still takes workers */
	atomic_int sleeping;            /* workers (about to be) waiting on cv_start */
	atomic_bool quit;
	/* the job */
	ParallelFn fn;
	void *ctx;
	int64_t items, chunk;            /* chunk: the smallest claim (the grain) */
	atomic_int_fast64_t next;
	int refs;                       /* shared pools: holders (under reg_mu) */
	struct ThreadPool *reg_next;    /* shared pools: the registry's list */
};

/* the process's shared pools, one per thread count */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static ThreadPool *reg_head;

typedef struct Worker { ThreadPool *p; int tid; } Worker;

static _Thread_local int tls_tid = 0;
static _Thread_local bool tls_in_job = false;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Guided self-scheduling: each claim takes 1/(2·threads) of what is left,
 * at least the job's grain (p->chunk), so the chunks shrink towards the end
 * and the threads finish within about one small chunk of each other, however
 * late one of them started or however long it was descheduled. */
static void run_chunks(ThreadPool *p, int tid)
{
	int64_t b = atomic_load(&p->next);
	for (;;) {
		if (b >= p->items)
			break;
		int64_t c = (p->items - b) / (2 * p->n);
		if (c < p->chunk)
			c = p->chunk;
		if (!atomic_compare_exchange_weak(&p->next, &b, b + c))
			continue;       /* b now holds the current value */
		int64_t e = b + c < p->items ? b + c : p->items;
		p->fn(p->ctx, b, e, tid);
		b = atomic_load(&p->next);
	}
}

static void *worker_main(void *arg)
{
	Worker *w = arg;
	ThreadPool *p = w->p;
	tls_tid = w->tid;
	uint64_t seen = 0;
	for (;;) {
		/* spin, then sleep, until a new generation or quit */
		int spins = 0;
		while (atomic_load(&p->gen) == seen && !atomic_load(&p->quit) && spins < SPIN_ITERS) {
			cpu_relax();
			spins++;
		}
		if (atomic_load(&p->gen) == seen && !atomic_load(&p->quit)) {
			/* sleeping is raised before gen is read again: a caller that
			 * bumps gen and then reads sleeping 0 is seen here (seq_cst) */
			pthread_mutex_lock(&p->mu);
			atomic_fetch_add(&p->sleeping, 1);
			while (atomic_load(&p->gen) == seen && !atomic_load(&p->quit))
				pthread_cond_wait(&p->cv_start, &p->mu);
			atomic_fetch_sub(&p->sleeping, 1);
			pthread_mutex_unlock(&p->mu);
		}
		if (atomic_load(&p->quit))
			break;
		seen = atomic_load(&p->gen);
		atomic_fetch_add(&p->running, 1);
		if (atomic_load(&p->open) && atomic_load(&p->gen) == seen) {
			tls_in_job = true;
			run_chunks(p, w->tid);
			tls_in_job = false;
		}
		if (atomic_fetch_sub(&p->running, 1) == 1) {
			pthread_mutex_lock(&p->mu);
			pthread_cond_signal(&p->cv_done);
			pthread_mutex_unlock(&p->mu);
		}
	}
	free(w);
	return NULL;
}

static int clamp_threads(int threads)
{
	return threads < 1 ? 1 : threads > 256 ? 256 : threads;
}

ThreadPool *threadpool_new(int threads)
{
	ThreadPool *p = calloc(1, sizeof *p);
	if (!p)
		wl_die(__FILE__, __LINE__, "out of memory");
	threads = clamp_threads(threads);
	p->n = 1;
	pthread_mutex_init(&p->mu, NULL);
	pthread_mutex_init(&p->owner, NULL);
	pthread_cond_init(&p->cv_start, NULL);
	pthread_cond_init(&p->cv_done, NULL);
	atomic_init(&p->gen, 0);
	atomic_init(&p->running, 0);
	atomic_init(&p->open, false);
	atomic_init(&p->sleeping, 0);
	atomic_init(&p->quit, false);
	atomic_init(&p->next, 0);
	if (threads > 1) {
		p->th = calloc((size_t)threads, sizeof *p->th);
		if (!p->th)
			wl_die(__FILE__, __LINE__, "out of memory");
		for (int i = 1; i < threads; i++) {
			Worker *w = malloc(sizeof *w);
			if (!w)
				wl_die(__FILE__, __LINE__, "out of memory");
			w->p = p;
			w->tid = i;
			if (pthread_create(&p->th[i], NULL, worker_main, w) != 0) {
				free(w);
				break;          /* fewer threads than asked: still correct */
			}
			p->n = i + 1;
		}
	}
	return p;
}

ThreadPool *threadpool_shared(int threads)
{
	threads = clamp_threads(threads);
	pthread_mutex_lock(&reg_mu);
	ThreadPool *p = reg_head;
	while (p && p->n != threads)
		p = p->reg_next;
	if (!p) {
		p = threadpool_new(threads);
		if (p->n != threads) {          /* fewer workers started: not a match for later callers */
			pthread_mutex_unlock(&reg_mu);
			return p;
		}
		p->reg_next = reg_head;
		reg_head = p;
	}
	p->refs++;
	pthread_mutex_unlock(&reg_mu);
	return p;
}

void threadpool_free(ThreadPool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&reg_mu);
	if (p->refs > 0) {                  /* shared: the last holder frees it */
		if (--p->refs > 0) {
			pthread_mutex_unlock(&reg_mu);
			return;
		}
		for (ThreadPool **q = &reg_head; *q; q = &(*q)->reg_next)
			if (*q == p) {
				*q = p->reg_next;
				break;
			}
	}
	pthread_mutex_unlock(&reg_mu);
	pthread_mutex_lock(&p->mu);
	atomic_store(&p->quit, true);
	pthread_cond_broadcast(&p->cv_start);
	pthread_mutex_unlock(&p->mu);
	for (int i = 1; i < p->n; i++)
		pthread_join(p->th[i], NULL);
	free(p->th);
	pthread_mutex_destroy(&p->mu);
	pthread_mutex_destroy(&p->owner);
	pthread_cond_destroy(&p->cv_start);
	pthread_cond_destroy(&p->cv_done);
	free(p);
}

int threadpool_threads(const ThreadPool *p)
{
	return p ? p->n : 1;
}

void parallel_for(ThreadPool *p, int64_t n, int64_t grain, ParallelFn fn, void *ctx)
{
	if (n <= 0)
		return;
	if (grain < 1)
		grain = 1;
	if (!p || p->n == 1 || n <= grain || tls_in_job || pthread_mutex_trylock(&p->owner) != 0) {
		bool was = tls_in_job;
		tls_in_job = true;
		fn(ctx, 0, n, tls_tid);
		tls_in_job = was;
		return;
	}
	p->fn = fn;
	p->ctx = ctx;
	p->items = n;
	p->chunk = grain;
	atomic_store(&p->next, 0);
	atomic_store(&p->open, true);
	atomic_fetch_add(&p->gen, 1);
	if (atomic_load(&p->sleeping)) {      /* a wake only when a worker went to sleep */
		pthread_mutex_lock(&p->mu);
		pthread_cond_broadcast(&p->cv_start);
		pthread_mutex_unlock(&p->mu);
	}

	tls_in_job = true;
	run_chunks(p, 0);
	tls_in_job = false;
	atomic_store(&p->open, false);   /* every chunk is claimed: late workers stay out */

	int spins = 0;
	while (atomic_load(&p->running) > 0 && spins < SPIN_ITERS) {
		cpu_relax();
		spins++;
	}
	if (atomic_load(&p->running) > 0) {
		pthread_mutex_lock(&p->mu);
		while (atomic_load(&p->running) > 0)
			pthread_cond_wait(&p->cv_done, &p->mu);
		pthread_mutex_unlock(&p->mu);
	}
	pthread_mutex_unlock(&p->owner);
}
