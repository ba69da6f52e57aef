/* qk_kernel_peak.c — the host attention's Q·Kᵀ micro-kernel alone (a C copy
 * with AVX-512 intrinsics of what kgen_attention.c generates: a tile of BR = 12
 * query rows x 2 vectors of keys, 24 accumulators, one broadcast of q and two
 * panel loads per 24 FMAs), to tell the loop's own ceiling from the rest of the
 * kernel (softmax, O rescale, pack). Prints GFLOP/s on one thread for
 *   hd 64 panels hot in L1 (the loop length the encoder has),
 *   hd 64 with the panels of 1536 keys streamed from L2 (as in the kernel),
 *   hd 384 hot (a long loop: what the GEMM's K loop sees).
 * Compare with bench/fma_peak.c on 1 thread (bench/RESULTS.md, stop 27: Zen 4
 * 108-111 GFLOP/s at hd 64 from L2, 112-116 at 384, against 117).
 *
 *   clang-19 -O2 -march=native bench/qk_kernel_peak.c -o /tmp/qk && /tmp/qk
 *
 * clang keeps the 24 accumulators in registers at -O2 (as the generated
 * kernel does); gcc 12 needs -O3 (at -O2 it spills them: 41-49 GFLOP/s).
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BR 12

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#ifdef __AVX512F__
/* np panels of 32 keys x hd, nrt row tiles of BR rows sharing each pair of panels */
static double run(int hd, int np, int nrt, double seconds)
{
	float *q = aligned_alloc(64, (size_t)nrt * BR * hd * 4);
	float *kt = aligned_alloc(64, (size_t)np * hd * 32 * 4);
	float *p = aligned_alloc(64, BR * 64 * 4);
	for (long i = 0; i < (long)nrt * BR * hd; i++)
		q[i] = 1e-3f * (float)(i % 7);
	for (long i = 0; i < (long)np * hd * 32; i++)
		kt[i] = 1e-3f * (float)(i % 5);
	long reps = 0;
	double t0 = now(), t;
	do {
		for (int pb = 0; pb < np; pb += 2)
			for (int rt = 0; rt < nrt; rt++)
				for (int pan = pb; pan < pb + 2 && pan < np; pan++) {
					const float *k = kt + (size_t)pan * hd * 32, *qr = q + (size_t)rt * BR * hd;
					__m512 a[BR][2];
					for (int i = 0; i < BR; i++)
						a[i][0] = a[i][1] = _mm512_setzero_ps();
					for (int e = 0; e < hd; e++) {
						__m512 k0 = _mm512_load_ps(k + e * 32), k1 = _mm512_load_ps(k + e * 32 + 16);
						for (int i = 0; i < BR; i++) {
							__m512 b = _mm512_set1_ps(qr[i * hd + e]);
							a[i][0] = _mm512_fmadd_ps(b, k0, a[i][0]);
							a[i][1] = _mm512_fmadd_ps(b, k1, a[i][1]);
						}
					}
					for (int i = 0; i < BR; i++) {
						_mm512_store_ps(p + i * 64 + (pan & 1) * 32, a[i][0]);
						_mm512_store_ps(p + i * 64 + (pan & 1) * 32 + 16, a[i][1]);
					}
					__asm__ volatile("" : : "r"(p) : "memory");
				}
		reps++;
		t = now() - t0;
	} while (t < seconds);
	free(q);
	free(kt);
	free(p);
	return 2.0 * reps * np * nrt * hd * BR * 32 / t / 1e9;
}

int main(void)
{
	printf("qk_kernel_gflops hd=64 hot=%.1f\n", run(64, 2, 4, 0.5));
	printf("qk_kernel_gflops hd=64 l2=%.1f\n", run(64, 48, 4, 0.5));
	printf("qk_kernel_gflops hd=384 hot=%.1f\n", run(384, 2, 1, 0.5));
	return 0;
}
#else
int main(void)
{
	fprintf(stderr, "qk_kernel_peak: needs AVX-512 (compile with -march=native on an AVX-512 CPU)\n");
	return 1;
}
#endif
