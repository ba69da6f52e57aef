/* test_onnx_io.c: placeholder until the helper writes it; fails on purpose */
int main(void) { return 1; }
