/* parallel.hpp — ccl::parallel_for over [0, n) in contiguous chunks on
 * std::threads ($CCL_THREADS, default online CPUs, at most 4). Work items
 * write disjoint outputs with integer math, so results never depend on the
 * thread count. */
#ifndef CCL_PARALLEL_HPP
#define CCL_PARALLEL_HPP

#include <cstdlib>
#include <thread>
#include <vector>

namespace ccl {

inline int num_threads()
{
	static int n = 0;
	if (n == 0) {
		const char *e = std::getenv("CCL_THREADS");
		int v = e ? std::atoi(e) : (int)std::thread::hardware_concurrency();
		n = v < 1 ? 1 : v > 4 ? 4 : v;
	}
	return n;
}

/* fn(i0, i1, tid) over chunks; grain = minimum items per chunk. */
template <typename Fn>
void parallel_for(long long n, long long grain, Fn fn)
{
	int nt = num_threads();
	if (n <= 0)
		return;
	if (grain < 1)
		grain = 1;
	long long chunks = (n + grain - 1) / grain;
	if (nt <= 1 || chunks <= 1) {
		fn(0LL, n, 0);
		return;
	}
	if (chunks > nt)
		chunks = nt;
	std::vector<std::thread> th;
	long long per = (n + chunks - 1) / chunks;
	for (int t = 1; t < chunks; t++) {
		long long a = t * per, b = a + per < n ? a + per : n;
		if (a < b)
			th.emplace_back([=] { fn(a, b, t); });
	}
	fn(0LL, per < n ? per : n, 0);
	for (auto &x : th)
		x.join();
}

} // namespace ccl
#endif
