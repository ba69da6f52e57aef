/* onnx_export.c: being written */
