/**
 * The trainer's native operations, as the addon exposes them (`loadNative().ops`). Internal: the
 * tensor layer calls these with pointers it got from an allocator, so nothing here re-checks them.
 *
 * Conventions, for every op:
 * - `onDevice`: true runs the CUDA kernel on `stream`, false the CPU reference (synchronously).
 * - Pointers are numbers (addresses from an Allocator), `stream` a native stream handle (0: default).
 * - Matrices are row-major f32; index arrays are i32; masks of dropout are u8.
 * - Every op with a float reduction is deterministic: the same inputs give bit-identical outputs,
 *   run after run (no float atomics), except `scatterAddRows` and `embeddingBackward`'s dWte, which
 *   use atomics on the GPU.
 * - Nothing synchronises the host; results that are scalars are written to device memory.
 * @module
 */
export interface NativeOps {
  /** C[M,N] = alpha * op(A) @ op(B) + beta * C. op(A) is [M,K] (A stored [K,M] when transA); op(B) is [K,N] (B stored [N,K] when transB). cuBLAS sgemm when it loads, else a tiled kernel. */
  gemm(
    onDevice: boolean,
    stream: number,
    transA: boolean,
    transB: boolean,
    M: number,
    N: number,
    K: number,
    alpha: number,
    A: number,
    B: number,
    beta: number,
    C: number,
  ): void;
  /** Y[rows,cols] += bias[cols]. */
  addBias(onDevice: boolean, stream: number, Y: number, bias: number, rows: number, cols: number): void;
  /** Y[rows,cols] = max(Y + bias[cols], 0): the bias add fused with the ReLU after it. */
  addBiasRelu(onDevice: boolean, stream: number, Y: number, bias: number, rows: number, cols: number): void;
  /** dY = dY where Y > 0 else 0 (in place; Y is the ReLU's output), then dBias = column sums of dY: ReLU's backward fused with the bias gradient before it. */
  reluBiasGrad(onDevice: boolean, stream: number, Y: number, dY: number, dBias: number, rows: number, cols: number): void;
  /** dBias[cols] = (accumulate ? dBias : 0) + column sums of dY[rows,cols]. */
  biasGrad(onDevice: boolean, stream: number, dY: number, dBias: number, rows: number, cols: number, accumulate: boolean): void;
  /** Y = max(X, 0); Y may be X. */
  relu(onDevice: boolean, stream: number, X: number, Y: number, n: number): void;
  /** dX = dY where Y > 0, else 0; dX may be dY. */
  reluBackward(onDevice: boolean, stream: number, Y: number, dY: number, dX: number, n: number): void;
  /** mask[i] = keep ? 1 : 0 with keep probability 1-p from a counter-based RNG (seed, offset + i); Y = X * mask / (1-p). */
  dropout(onDevice: boolean, stream: number, X: number, Y: number, mask: number, n: number, p: number, seed: number, offset: number): void;
  /** dX = dY * mask / (1-p). */
  dropoutBackward(onDevice: boolean, stream: number, dY: number, mask: number, dX: number, n: number, p: number): void;
  /**
   * Fused softmax cross-entropy over the rows listed in rowIndex (i32[R]; rowIndex 0 and R = N: all rows).
   * Writes dLogits[N,C] = (softmax - onehot) / R on those rows and 0 elsewhere, the mean loss to
   * lossOut (f32[1]) and the number of rows whose argmax equals the label to correctOut (i32[1]).
   */
  softmaxCrossEntropy(
    onDevice: boolean,
    stream: number,
    logits: number,
    labels: number,
    rowIndex: number,
    R: number,
    N: number,
    C: number,
    dLogits: number,
    lossOut: number,
    correctOut: number,
  ): void;
  /**
   * softmaxCrossEntropy over all N rows (N >= 1), fused with the bias gradient of the layer that
   * made the logits: dBias[C] = column sums of dLogits, bit-identical to biasGrad after
   * softmaxCrossEntropy. step: 0, or an i32 step counter (device memory on the GPU) naming the slot
   * of lossOut[] and correctOut[] that receives the results.
   */
  softmaxCrossEntropyBiasGrad(
    onDevice: boolean,
    stream: number,
    logits: number,
    labels: number,
    N: number,
    C: number,
    dLogits: number,
    dBias: number,
    lossOut: number,
    correctOut: number,
    step: number,
  ): void;
  /** correctOut (i32[1]) = rows (of rowIndex, as above) whose argmax equals the label. */
  accuracy(
    onDevice: boolean,
    stream: number,
    logits: number,
    labels: number,
    rowIndex: number,
    R: number,
    N: number,
    C: number,
    correctOut: number,
  ): void;
  /** W -= lr * G. */
  sgd(onDevice: boolean, stream: number, W: number, G: number, n: number, lr: number): void;
  /** Adam (PyTorch's form, no weight decay), step counted from 1. */
  adam(
    onDevice: boolean,
    stream: number,
    W: number,
    G: number,
    M: number,
    V: number,
    n: number,
    lr: number,
    beta1: number,
    beta2: number,
    eps: number,
    step: number,
  ): void;
  /** out[e,:] = X[index[e],:] for e < E; H columns. */
  gatherRows(onDevice: boolean, stream: number, X: number, index: number, out: number, E: number, H: number): void;
  /**
   * A batch in one launch: for r < rows, with i = index[(step ? *step : 0) * rows + r], xOut[r,:] =
   * X[i,:] (H columns) and yOut[r] = labels[i]. step: 0, or an i32 step counter (device memory on
   * the GPU), so that a step captured into a CUDA Graph reads the batch of the step being replayed.
   */
  gatherBatch(
    onDevice: boolean,
    stream: number,
    X: number,
    labels: number,
    index: number,
    step: number,
    rows: number,
    H: number,
    xOut: number,
    yOut: number,
  ): void;
  /** out[index[e],:] += src[e,:] (index_add). */
  scatterAddRows(onDevice: boolean, stream: number, src: number, index: number, out: number, E: number, H: number): void;
  /** out[e,:] = X[e,:] * w[e] for e < E (per-edge message weights); out may be X. */
  scaleRows(onDevice: boolean, stream: number, X: number, w: number, out: number, E: number, H: number): void;
  /** out[N,H] = A @ X, A in CSR (rowptr i32[N+1], col i32[nnz], val f32[nnz]); X has H columns and any number of rows. */
  spmm(onDevice: boolean, stream: number, rowptr: number, col: number, val: number, X: number, out: number, N: number, H: number): void;
  /** spmm over X stored as bf16 (u16 bits), summed in f32. */
  spmmBf16(onDevice: boolean, stream: number, rowptr: number, col: number, val: number, X: number, out: number, N: number, H: number): void;
  /** Y (bf16 bits, u16) = X rounded to nearest even. */
  f32ToBf16(onDevice: boolean, stream: number, X: number, Y: number, n: number): void;
  /** Bytes of temporary storage csrBuild needs for E edges and N rows. */
  csrBuildTempBytes(onDevice: boolean, E: number, N: number): number;
  /** From edges (rows i32[E], cols i32[E]): rowptr i32[N+1] and col i32[E] with each row's columns in input order (stable sort by row). */
  csrBuild(
    onDevice: boolean,
    stream: number,
    rows: number,
    cols: number,
    E: number,
    N: number,
    rowptr: number,
    colOut: number,
    temp: number,
    tempBytes: number,
  ): void;
  /** deg[i] (f32[N]) = rowptr[i+1] - rowptr[i]. */
  rowDegrees(onDevice: boolean, stream: number, rowptr: number, N: number, deg: number): void;
  /** val[e] for the CSR edges: mode 0: 1/sqrt(deg[row] * deg[col]); 1: 1/deg[row]; 2: 1/deg[col]; 0 where a degree is 0. */
  edgeNorm(onDevice: boolean, stream: number, rowptr: number, col: number, N: number, deg: number, mode: number, val: number): void;
  /** w[e] for an edge list (src i32[E] -> dst i32[E]): mode 0: 1/sqrt(deg[dst] * deg[src]); 1: 1/deg[dst]; 2: 1/deg[src]; 0 where a degree is 0. */
  edgeNormList(onDevice: boolean, stream: number, src: number, dst: number, deg: number, E: number, mode: number, w: number): void;
  /** out[i] (i32) = uniform integer in [0, modulo) from (seed, offset + i). */
  randomInts(onDevice: boolean, stream: number, out: number, n: number, modulo: number, seed: number, offset: number): void;
  /** out[i] (f32) = standard normal from (seed, offset + i). */
  randomNormal(onDevice: boolean, stream: number, out: number, n: number, seed: number, offset: number): void;
  /** out[i] (f32) = uniform in [low, high) from (seed, offset + i). */
  randomUniform(onDevice: boolean, stream: number, out: number, n: number, low: number, high: number, seed: number, offset: number): void;
  /** n f32 values at ptr = value. */
  fillF32(onDevice: boolean, stream: number, ptr: number, n: number, value: number): void;
  /** n i32 values at ptr = value. */
  fillI32(onDevice: boolean, stream: number, ptr: number, n: number, value: number): void;
  /** *ptr += value (one i32), in stream order: advances a device-side step counter. */
  addI32(onDevice: boolean, stream: number, ptr: number, value: number): void;
  /**
   * Work queued on `waiter` after this call waits for the work queued on `signaller` before it (an
   * event recorded on signaller, waited on by waiter). During a CUDA Graph capture this forks the
   * capture onto another stream or joins it back. Nothing to do for the CPU kernels (synchronous).
   */
  streamWait(onDevice: boolean, waiter: number, signaller: number): void;
  /** Y = alpha * X (n values); Y may be X. */
  scale(onDevice: boolean, stream: number, alpha: number, X: number, Y: number, n: number): void;
  /** Y += alpha * X (n values; fmaf on both paths). */
  axpy(onDevice: boolean, stream: number, alpha: number, X: number, Y: number, n: number): void;
  /**
   * For i in [0, batch): C_i[M,N] = alpha * op(A_i) @ op(B_i) + beta * C_i, with A_i = A + i * strideA,
   * B_i = B + i * strideB, C_i = C + i * strideC (strides in elements, not bytes). Row-major with leading
   * dimensions: lda, ldb, ldc are the elements per row of the stored matrices (A_i stored [M, lda], or
   * [K, lda] when transA; B_i stored [K, ldb], or [N, ldb] when transB; C_i [M, ldc]), so a matrix may be
   * a column slice of a wider buffer. beta 0: C is not read. A stride of 0 reuses one matrix for every
   * i; the C_i must not overlap. cuBLAS sgemmStridedBatched (FP32 math, as gemm) when it loads, else a
   * tiled kernel. Throws RangeError for a dimension or batch below 1, a leading dimension smaller than
   * its stored row, a negative stride or overlapping C_i.
   */
  gemmStridedBatched(
    onDevice: boolean,
    stream: number,
    transA: boolean,
    transB: boolean,
    M: number,
    N: number,
    K: number,
    alpha: number,
    A: number,
    lda: number,
    strideA: number,
    B: number,
    ldb: number,
    strideB: number,
    beta: number,
    C: number,
    ldc: number,
    strideC: number,
    batch: number,
  ): void;
  /**
   * Y[b,h,t,d] = X[(b*T + t) * ldx + h*D + d]: the heads of a [B*T, H*D] slice of a wider buffer (ldx >= H*D
   * elements per row, e.g. q, k or v inside a [B*T, 3*H*D] qkv buffer with ldx = 3*H*D) laid out as
   * contiguous [B, H, T, D] matrices for a batched product. Y must not overlap X.
   */
  headsToBatch(onDevice: boolean, stream: number, X: number, ldx: number, Y: number, B: number, T: number, H: number, D: number): void;
  /** The inverse of headsToBatch: X[(b*T + t) * ldx + h*D + d] = Y[b,h,t,d]; writes only those elements of X. */
  batchToHeads(onDevice: boolean, stream: number, Y: number, X: number, ldx: number, B: number, T: number, H: number, D: number): void;
  /**
   * Causal softmax of `rows` TxT score matrices (S and P are [rows*T, T]; rows = B*H): for each matrix and
   * query row i, P[i,j] = softmax over j <= i of scale * S[i,j] (the row maximum subtracted first), and
   * P[i,j] = 0 for j > i. P may be S.
   */
  causalSoftmax(onDevice: boolean, stream: number, S: number, P: number, rows: number, T: number, scale: number): void;
  /**
   * The backward of causalSoftmax, from its output P: dS[i,j] = scale * P[i,j] * (dP[i,j] - sum over k <= i
   * of P[i,k] * dP[i,k]) for j <= i, 0 for j > i. dS may be dP.
   */
  causalSoftmaxBackward(onDevice: boolean, stream: number, P: number, dP: number, dS: number, rows: number, T: number, scale: number): void;
  /**
   * Layer normalisation of each row of X[rows, cols]: mean, rstd = 1 / sqrt(var + eps) (biased variance),
   * Y = (X - mean) * rstd * gamma + beta (gamma, beta f32[cols]). mean and rstd (f32[rows]) are saved for
   * the backward. Y may be X.
   */
  layerNorm(
    onDevice: boolean,
    stream: number,
    X: number,
    gamma: number,
    beta: number,
    Y: number,
    mean: number,
    rstd: number,
    rows: number,
    cols: number,
    eps: number,
  ): void;
  /**
   * The backward of layerNorm, from its input X and the saved mean and rstd: dX (overwritten; dX may be dY),
   * and dGamma, dBeta (f32[cols]) = (accumulate ? their values : 0) + the column sums of dY * xhat and dY,
   * deterministic (per-chunk partial sums added in a fixed order, no atomics).
   */
  layerNormBackward(
    onDevice: boolean,
    stream: number,
    dY: number,
    X: number,
    gamma: number,
    mean: number,
    rstd: number,
    dX: number,
    dGamma: number,
    dBeta: number,
    rows: number,
    cols: number,
    accumulate: boolean,
  ): void;
  /** Y = GELU(X), the tanh approximation (PyTorch's approximate='tanh'); Y may be X. */
  gelu(onDevice: boolean, stream: number, X: number, Y: number, n: number): void;
  /** dX = dY * GELU'(X) (the tanh approximation's derivative); dX may be dY. */
  geluBackward(onDevice: boolean, stream: number, X: number, dY: number, dX: number, n: number): void;
  /**
   * out[b*T + t, :] = wte[tokens[b*T + t], :] + wpe[t, :] (tokens i32[B*T], wte [V, C], wpe [at least T, C],
   * out [B*T, C]). Token ids are not checked against V (V is not passed: the caller checks the data on the
   * host); the CPU reference throws RangeError for a negative id before writing anything, the GPU kernel
   * leaves out the wte term of a negative id.
   */
  embedding(
    onDevice: boolean,
    stream: number,
    tokens: number,
    wte: number,
    wpe: number,
    out: number,
    B: number,
    T: number,
    C: number,
  ): void;
  /**
   * The backward of embedding, accumulating (the caller zeroes the gradients first): dWte[tokens[r], :] +=
   * dOut[r, :] for every row r (float atomics on the GPU, as scatterAddRows: not bit-reproducible when
   * tokens repeat), and dWpe[t, :] += sum over b of dOut[b*T + t, :] (deterministic: b in order). Token
   * ids as in embedding: the CPU reference throws RangeError for a negative id before writing anything,
   * the GPU kernel skips it.
   */
  embeddingBackward(
    onDevice: boolean,
    stream: number,
    dOut: number,
    tokens: number,
    dWte: number,
    dWpe: number,
    B: number,
    T: number,
    C: number,
  ): void;
  /** Which matrix product the GPU path uses: 'cublas' or 'tiled' (cuBLAS missing), with the reason. */
  gemmBackend(): { backend: 'cublas' | 'tiled'; reason: string };

  /**
   * The workspace a stream needs before ops run on it: `scratchBytes` for the reductions' partial
   * sums (a bound that holds whatever the ops' sizes: 2 MiB, see native/src/ops/workspace.hpp) and
   * `blasBytes` for cuBLAS (32 MiB where cuBLAS loads). Both 0 on the CPU, whose ops need none.
   */
  workspaceBytes(onDevice: boolean): WorkspaceBytes;
  /**
   * Gives `stream` its workspace, memory the caller allocated (from the run's allocator, so the
   * allocator counts it): at least {@link NativeOps.workspaceBytes} of each part. The GPU ops on
   * that stream then use it (cuBLAS through cublasSetWorkspace) instead of allocating their own;
   * the addresses stay fixed while bound, so work captured into a CUDA Graph may use them. Throws
   * RangeError for a part that is too small, InvalidStateError when the stream has one already.
   */
  bindStreamWorkspace(
    onDevice: boolean,
    stream: number,
    scratchPtr: number,
    scratchBytes: number,
    blasPtr: number,
    blasBytes: number,
  ): void;
  /**
   * Takes the stream's workspace back (cuBLAS lets go of it before this returns); the caller frees
   * it afterwards, once the stream's work is done. Throws InvalidStateError when none is bound.
   */
  unbindStreamWorkspace(onDevice: boolean, stream: number): void;
  /**
   * How many times the GPU ops allocated scratch or a cuBLAS workspace themselves, on a stream
   * with no workspace bound (process-wide, since load). A run whose streams all have workspaces
   * leaves it unchanged.
   */
  unboundWorkspaceAllocations(): number;
}

/** The sizes of the two parts of a stream's workspace, in bytes. */
export interface WorkspaceBytes {
  scratchBytes: number;
  blasBytes: number;
}
