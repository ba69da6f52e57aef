/* fma_peak.c — the machine's measured single-precision FMA peak.
 *
 *   cc -O2 -pthread bench/fma_peak.c -o fma_peak && ./fma_peak [THREADS] [SECONDS]
 *
 * Each thread runs 24 independent chains of vfmadd231ps on 16-float (AVX-512)
 * registers — enough independent chains to cover the FMA latency on two
 * ports — for about SECONDS (default 1), 5 trials, and the best trial is
 * reported. Without AVX-512 it uses 8-float AVX2 registers (12 chains).
 * Prints "fma_peak_gflops=X threads=T isa=avx512|avx2" on stdout
 * (1 FMA = 2 FLOP; X counts all threads), then "fma_peak_cpu_gflops=Y": the
 * best trial's FLOPs per second of CPU time of one thread (each thread's
 * CLOCK_THREAD_CPUTIME_ID), the peak in a unit that time slicing on a loaded
 * machine does not dilute (compare with a kernel's FLOPs per CPU second).
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile float sink;
static double g_seconds = 1.0;
static int g_avx512;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define REP24(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) \
                 X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)
#define REP12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

/* iters × 24 FMAs of 16 lanes */
__attribute__((target("avx512f"), noinline)) static void chains512(int64_t iters)
{
	__m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
#define DECL(i) __m512 c##i = _mm512_set1_ps((float)(i));
	REP24(DECL)
#undef DECL
	for (int64_t k = 0; k < iters; k++) {
#define STEP(i) c##i = _mm512_fmadd_ps(c##i, a, b);
		REP24(STEP)
#undef STEP
		__asm__ volatile("" ::: "memory");
	}
	__m512 s = _mm512_setzero_ps();
#define SUM(i) s = _mm512_add_ps(s, c##i);
	REP24(SUM)
#undef SUM
	sink = _mm512_reduce_add_ps(s);
}

/* iters × 12 FMAs of 8 lanes */
__attribute__((target("avx2,fma"), noinline)) static void chains256(int64_t iters)
{
	__m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
#define DECL(i) __m256 c##i = _mm256_set1_ps((float)(i));
	REP12(DECL)
#undef DECL
	for (int64_t k = 0; k < iters; k++) {
#define STEP(i) c##i = _mm256_fmadd_ps(c##i, a, b);
		REP12(STEP)
#undef STEP
		__asm__ volatile("" ::: "memory");
	}
	__m256 s = _mm256_setzero_ps();
#define SUM(i) s = _mm256_add_ps(s, c##i);
	REP12(SUM)
#undef SUM
	float f[8];
	_mm256_storeu_ps(f, s);
	sink = f[0] + f[7];
}

static double flops_per_iter(void) { return g_avx512 ? 24.0 * 16 * 2 : 12.0 * 8 * 2; }

static void chains(int64_t iters)
{
	if (g_avx512)
		chains512(iters);
	else
		chains256(iters);
}

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct Job {
	int64_t iters;
	double t0, t1, cpu;
	pthread_barrier_t *bar;
} Job;

static void *worker(void *arg)
{
	Job *j = arg;
	pthread_barrier_wait(j->bar);
	double c0 = cpu_now();
	j->t0 = now();
	chains(j->iters);
	j->t1 = now();
	j->cpu = cpu_now() - c0;
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 2;
	if (argc > 2)
		g_seconds = atof(argv[2]);
	if (threads < 1 || threads > 256 || g_seconds <= 0) {
		fprintf(stderr, "usage: fma_peak [THREADS] [SECONDS]\n");
		return 2;
	}
	__builtin_cpu_init();
	g_avx512 = __builtin_cpu_supports("avx512f");
	if (!g_avx512 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
		fprintf(stderr, "fma_peak: this CPU has neither AVX-512 nor AVX2+FMA\n");
		return 1;
	}
	/* calibrate one thread to ~0.1 s */
	int64_t iters = 1 << 20;
	for (;;) {
		double t = now();
		chains(iters);
		t = now() - t;
		if (t > 0.1) {
			iters = (int64_t)(iters * g_seconds / t);
			break;
		}
		iters *= 2;
	}
	double best = 0, best_cpu = 0;
	for (int trial = 0; trial < 5; trial++) {
		pthread_barrier_t bar;
		pthread_barrier_init(&bar, NULL, (unsigned)threads);
		pthread_t *th = calloc((size_t)threads, sizeof *th);
		Job *jobs = calloc((size_t)threads, sizeof *jobs);
		for (int i = 0; i < threads; i++) {
			jobs[i] = (Job){.iters = iters, .bar = &bar};
			if (i)
				pthread_create(&th[i], NULL, worker, &jobs[i]);
		}
		worker(&jobs[0]);
		for (int i = 1; i < threads; i++)
			pthread_join(th[i], NULL);
		double t0 = jobs[0].t0, t1 = jobs[0].t1;
		for (int i = 1; i < threads; i++) {
			t0 = jobs[i].t0 < t0 ? jobs[i].t0 : t0;
			t1 = jobs[i].t1 > t1 ? jobs[i].t1 : t1;
		}
		double g = flops_per_iter() * (double)iters * threads / (t1 - t0) / 1e9;
		best = g > best ? g : best;
		for (int i = 0; i < threads; i++) {
			double gc = flops_per_iter() * (double)iters / jobs[i].cpu / 1e9;
			best_cpu = gc > best_cpu ? gc : best_cpu;
		}
		free(th);
		free(jobs);
		pthread_barrier_destroy(&bar);
	}
	printf("fma_peak_gflops=%.1f threads=%d isa=%s\n", best, threads, g_avx512 ? "avx512" : "avx2");
	printf("fma_peak_cpu_gflops=%.1f (per thread, per CPU second)\n", best_cpu);
	return 0;
}
