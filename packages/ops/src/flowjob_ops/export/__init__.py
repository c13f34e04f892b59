"""Jobs written in other formats: ONNX (``onnx_export``, legacy ``flow.onnx.export``; the optional ``onnx``
extra)."""
