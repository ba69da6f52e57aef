/* check_run.h — the body of every unit test's main(): add the tests to the
 * test case, the test case to the suite, run it, exit status from the
 * failures (CHECK_MAIN: the whole main() of the simple ones). */
#ifndef WLOWER_CHECK_RUN_H
#define WLOWER_CHECK_RUN_H
#include <check.h>
#include <stdlib.h>

/* Adds the tests of a NULL-terminated list to tc. */
static inline void check_add(TCase *tc, const TTest *const *tests)
{
	for (int i = 0; tests[i]; i++)
		tcase_add_test(tc, tests[i]);
}

static inline int check_run(Suite *s, TCase *tc)
{
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* main() of a unit test with one test case and nothing else to set:
 * CHECK_MAIN("suite", "tcase", test_a, test_b, ...). */
static inline int check_main(const char *suite, const char *tcase, const TTest *const *tests)
{
	Suite *s = suite_create(suite);
	TCase *tc = tcase_create(tcase);
	check_add(tc, tests);
	return check_run(s, tc);
}
#define CHECK_MAIN(suite, tcase, ...) \
	int main(void) { return check_main(suite, tcase, (const TTest *const[]){__VA_ARGS__, NULL}); }

#endif
