/* onnx_import.c: being written */
