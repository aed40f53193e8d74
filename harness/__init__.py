"""convconf: differential conformance harness for convolution on ExecuTorch delegates."""

# Bump when a change alters what a lowered program or its checks would be (invalidates caches).
__version__ = "0.1.0"
