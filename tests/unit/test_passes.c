/* test_passes.c: placeholder until the helper writes it; fails on purpose */
int main(void) { return 1; }
