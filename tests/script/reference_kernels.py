"""Reference kernels written by hand in tilecraft script form (importable by other tests).

``MATMUL``: 128x128x128 matmul, one block with ``T.init``. ``SOFTMAX``: row softmax on
(64, 128) in three blocks (max, exp-sum, normalize). ``GPU_FUSED_MATMUL_ADD_RELU``: the
GPU-scheduled ``fused_matmul_add_relu`` kernel of the reference document (rfactor'd GEMV with
thread bindings and local buffers). Each text is exactly what the printer produces for it.
"""

MATMUL = """
@T.prim_func
def matmul(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    T.func_attr({"global_symbol": "matmul", "tir.noalias": True})
    with T.block("root"):
        for i, j, k in T.grid(128, 128, 128):
            with T.block("C"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                vk = T.axis.reduce(128, k)
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0.0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""  # noqa: E501

SOFTMAX = """
@T.prim_func
def softmax(A: T.Buffer((64, 128), "float32"), B: T.Buffer((64, 128), "float32")):
    with T.block("root"):
        A_max = T.alloc_buffer((64,), "float32")
        A_sum = T.alloc_buffer((64,), "float32")
        for i, k in T.grid(64, 128):
            with T.block("A_max"):
                vi = T.axis.spatial(64, i)
                vk = T.axis.reduce(128, k)
                T.reads(A[vi, vk])
                T.writes(A_max[vi])
                with T.init():
                    A_max[vi] = T.float32("-inf")
                A_max[vi] = T.max(A_max[vi], A[vi, vk])
        for i, k in T.grid(64, 128):
            with T.block("A_sum"):
                vi = T.axis.spatial(64, i)
                vk = T.axis.reduce(128, k)
                T.reads(A[vi, vk], A_max[vi])
                T.writes(A_sum[vi])
                with T.init():
                    A_sum[vi] = T.float32(0.0)
                A_sum[vi] = A_sum[vi] + T.exp(A[vi, vk] - A_max[vi])
        for i, j in T.grid(64, 128):
            with T.block("B"):
                vi = T.axis.spatial(64, i)
                vj = T.axis.spatial(128, j)
                T.reads(A[vi, vj], A_max[vi], A_sum[vi])
                T.writes(B[vi, vj])
                B[vi, vj] = T.exp(A[vi, vj] - A_max[vi]) / A_sum[vi]
"""

GPU_FUSED_MATMUL_ADD_RELU = """
@T.prim_func
def fused_matmul_add_relu(x: T.Buffer((T.int64(1), T.int64(768)), "float32"), permute_dims: T.Buffer((T.int64(768), T.int64(768)), "float32"), fc1_bias: T.Buffer((T.int64(768),), "float32"), compute_intermediate: T.Buffer((T.int64(1), T.int64(768)), "float32")):
    T.func_attr({"tir.is_scheduled": True, "tir.noalias": True})
    with T.block("root"):
        matmul_intermediate_local = T.alloc_buffer((T.int64(1), T.int64(768)), "float32", scope="local")
        matmul_intermediate_rf_local = T.alloc_buffer((T.int64(16), T.int64(1), T.int64(768)), "float32", scope="local")
        for ax0_fused_0 in T.thread_binding(T.int64(48), thread="blockIdx.x"):
            for ax0_fused_1 in T.thread_binding(T.int64(16), thread="threadIdx.x"):
                for ax1_fused_1 in T.thread_binding(T.int64(16), thread="threadIdx.y"):
                    with T.block("matmul_rf_init"):
                        vax1_fused_1 = T.axis.spatial(T.int64(16), ax1_fused_1)
                        v0 = T.axis.spatial(T.int64(768), ax0_fused_0 * T.int64(16) + ax0_fused_1)
                        T.reads()
                        T.writes(matmul_intermediate_rf_local[vax1_fused_1, T.int64(0), v0])
                        matmul_intermediate_rf_local[vax1_fused_1, T.int64(0), v0] = T.float32(0.0)
                    for ax1_fused_0, u in T.grid(T.int64(48), 1):
                        with T.block("matmul_rf_update"):
                            vax1_fused_1 = T.axis.spatial(T.int64(16), ax1_fused_1)
                            v0 = T.axis.spatial(T.int64(768), ax0_fused_0 * T.int64(16) + ax0_fused_1)
                            vax1_fused_0 = T.axis.reduce(T.int64(48), ax1_fused_0)
                            T.reads(matmul_intermediate_rf_local[vax1_fused_1, T.int64(0), v0], x[T.int64(0), vax1_fused_0 * T.int64(16) + vax1_fused_1], permute_dims[vax1_fused_0 * T.int64(16) + vax1_fused_1, v0])
                            T.writes(matmul_intermediate_rf_local[vax1_fused_1, T.int64(0), v0])
                            matmul_intermediate_rf_local[vax1_fused_1, T.int64(0), v0] = matmul_intermediate_rf_local[vax1_fused_1, T.int64(0), v0] + x[T.int64(0), vax1_fused_0 * T.int64(16) + vax1_fused_1] * permute_dims[vax1_fused_0 * T.int64(16) + vax1_fused_1, v0]
            for ax1_fused in T.thread_binding(T.int64(16), thread="threadIdx.x"):
                for ax0 in T.thread_binding(T.int64(16), thread="threadIdx.y"):
                    with T.block("matmul"):
                        vax1_fused_1 = T.axis.reduce(T.int64(16), ax0)
                        v0 = T.axis.spatial(T.int64(768), ax0_fused_0 * T.int64(16) + ax1_fused)
                        T.reads(matmul_intermediate_rf_local[vax1_fused_1, T.int64(0), v0])
                        T.writes(matmul_intermediate_local[T.int64(0), v0])
                        with T.init():
                            matmul_intermediate_local[T.int64(0), v0] = T.float32(0.0)
                        matmul_intermediate_local[T.int64(0), v0] = matmul_intermediate_local[T.int64(0), v0] + matmul_intermediate_rf_local[vax1_fused_1, T.int64(0), v0]
            for ax0_fused_0_1 in T.thread_binding(T.int64(16), thread="threadIdx.x"):
                for ax0_fused_1 in range(T.int64(1)):
                    with T.block("compute"):
                        v0 = T.axis.spatial(T.int64(768), ax0_fused_0 * T.int64(16) + ax0_fused_0_1 + ax0_fused_1)
                        T.reads(matmul_intermediate_local[T.int64(0), v0], fc1_bias[v0])
                        T.writes(compute_intermediate[T.int64(0), v0])
                        compute_intermediate[T.int64(0), v0] = T.max(matmul_intermediate_local[T.int64(0), v0] + fc1_bias[v0], T.float32(0.0))
"""  # noqa: E501

ALL = {"matmul": MATMUL, "softmax": SOFTMAX, "gpu_fused_matmul_add_relu": GPU_FUSED_MATMUL_ADD_RELU}
