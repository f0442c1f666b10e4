#!/usr/bin/env python3
"""gemm_emulation.py: host check of the cuBLAS call arguments of the CUDA backend, for
machines without a GPU. A column-major strided-batched GEMM emulator (cuBLAS's
semantics: element (i,j) of X at X[i + j*ld], op T transposes) is called exactly as
rt_cuda_gemm (dense.cu) calls cublasGemmStridedBatchedEx, with the operand, leading
dimension and stride arguments that conv.cu (im2col/col2im included), dense.cu (linear,
matmul) and the attention code pass. Results are compared with direct definitions
(and the attention backward with finite differences). The call sequences are a
hand-written mirror of the .cu files: change both together. Pure Python, no numpy;
a few seconds. The GPU tests (label gpu) check the real kernels against the CPU backend.
"""
import math
import random
import sys

random.seed(1)

def cublas_sbgemm(opA, opB, m, n, k, alpha, A, offA, lda, sA, B, offB, ldb, sB, beta, C, offC, ldc, sC, batch):
    # column-major: element (i,j) of X at X[off + i + j*ld]
    for b in range(batch):
        for i in range(m):
            for j in range(n):
                acc = 0.0
                for p in range(k):
                    a = A[offA + b*sA + (i + p*lda if opA == 'N' else p + i*lda)]
                    bb = B[offB + b*sB + (p + j*ldb if opB == 'N' else j + p*ldb)]
                    acc += a*bb
                idx = offC + b*sC + i + j*ldc
                C[idx] = alpha*acc + (beta*C[idx] if beta != 0 else 0.0)

def gemm(ta, tb, m, n, k, alpha, A, offA, lda, sA, B, offB, ldb, sB, beta, C, offC, ldc, sC, batch):
    # rt_cuda_gemm: row-major C = op(A) op(B) -> cuBLAS(opB', opA', n, m, k, B, A)
    cublas_sbgemm('T' if tb else 'N', 'T' if ta else 'N', n, m, k, alpha, B, offB, ldb, sB,
                  A, offA, lda, sA, beta, C, offC, ldc, sC, batch)

def rnd(n): return [random.uniform(-1, 1) for _ in range(n)]
failures = 0
def close(a, b, what):
    global failures
    err = max(abs(x-y) for x, y in zip(a, b)); assert len(a) == len(b)
    failures += err >= 1e-9
    print("%-22s max err %.2e %s" % (what, err, "ok" if err < 1e-9 else "FAIL"))

# ---- conv2d --------------------------------------------------------------------------------
def conv_check(N, C, H, W, K, G, kh, kw, sh, sw, ph, pw, dh, dw):
    OH = (H + 2*ph - dh*(kh-1) - 1)//sh + 1; OW = (W + 2*pw - dw*(kw-1) - 1)//sw + 1
    Cg, Kg = C//G, K//G; ckk = Cg*kh*kw; P = OH*OW
    x = rnd(N*C*H*W); w = rnd(K*Cg*kh*kw); dy = rnd(N*K*P)
    X = lambda n,c,h,ww: x[((n*C+c)*H+h)*W+ww]
    # direct
    yref = [0.0]*(N*K*P); dxref = [0.0]*(N*C*H*W); dwref = [0.0]*(K*Cg*kh*kw)
    for n in range(N):
        for k_ in range(K):
            g = k_//Kg
            for oh in range(OH):
                for ow in range(OW):
                    s = 0.0
                    for c in range(Cg):
                        for i in range(kh):
                            for j in range(kw):
                                h = oh*sh - ph + i*dh; ww = ow*sw - pw + j*dw
                                if 0 <= h < H and 0 <= ww < W:
                                    wi = ((k_*Cg + c)*kh + i)*kw + j
                                    xi = ((n*C + g*Cg + c)*H + h)*W + ww
                                    s += w[wi]*x[xi]
                                    g_ = dy[(n*K+k_)*P + oh*OW+ow]
                                    dxref[xi] += w[wi]*g_; dwref[wi] += x[xi]*g_
                    yref[(n*K+k_)*P + oh*OW+ow] = s
    pointwise = kh == 1 and kw == 1 and sh == 1 and sw == 1 and ph == 0 and pw == 0
    colstride = C*kh*kw*P
    # im2col (conv.cu im2col_k), whole batch as one chunk
    def columns():
        if pointwise: return x[:]
        col = [0.0]*(N*colstride)
        for i_ in range(N*colstride):
            ow = i_ % OW; r = i_ // OW; oh = r % OH; r //= OH; j = r % kw; r //= kw; k = r % kh; r //= kh
            h = oh*sh - ph + k*dh; ww = ow*sw - pw + j*dw
            col[i_] = x[(r*H + h)*W + ww] if (0 <= h < H and 0 <= ww < W) else 0.0
        return col
    col = columns()
    y = [0.0]*(N*K*P)
    for g in range(G):
        gemm(False, False, Kg, P, ckk, 1.0, w, g*Kg*ckk, ckk, 0, col, g*ckk*P, P, colstride, 0.0, y, g*Kg*P, P, K*P, N)
    close(y, yref, "conv y")
    # dW (conv.cu rt_cuda_own_conv2d_bwd): per chunk of nb samples (here 2, so that the
    # chunk offsets are exercised), im2col_t_k and dy_t_k, then one GEMM batched over groups
    dW = [0.0]*len(w)
    for n0 in range(0, N, 2):
        nb = min(2, N - n0); inner = nb*P
        colt = [0.0]*(nb*colstride)
        for i_ in range(nb*colstride):
            ow = i_ % OW; r = i_ // OW; oh = r % OH; r //= OH; s = r % nb; r //= nb
            j = r % kw; r //= kw; k = r % kh; c = r // kh
            h = oh*sh - ph + k*dh; ww = ow*sw - pw + j*dw
            colt[i_] = x[(((n0 + s)*C + c)*H + h)*W + ww] if (0 <= h < H and 0 <= ww < W) else 0.0
        dyt = [0.0]*(nb*K*P)
        for i_ in range(nb*K*P):
            p_ = i_ % P; r = i_ // P; s = r % nb; k_ = r // nb
            dyt[i_] = dy[((n0 + s)*K + k_)*P + p_]
        gemm(False, True, Kg, ckk, inner, 1.0, dyt, 0, inner, Kg*inner, colt, 0, inner, ckk*inner, 1.0, dW, 0, ckk, Kg*ckk, G)
    close(dW, dwref, "conv dw")
    dcol = [0.0]*(N*colstride)
    for g in range(G):
        gemm(True, False, ckk, P, Kg, 1.0, w, g*Kg*ckk, ckk, 0, dy, g*Kg*P, P, K*P, 0.0, dcol, g*ckk*P, P, colstride, N)
    if pointwise:
        dx = dcol
    else:
        dx = [0.0]*(N*C*H*W)
        for i_ in range(N*C*H*W):
            ww = i_ % W; r = i_ // W; h = r % H; r //= H
            s = 0.0
            for k in range(kh):
                th = h + ph - k*dh
                if th < 0 or th % sh: continue
                oh = th // sh
                if oh >= OH: continue
                for j in range(kw):
                    tw = ww + pw - j*dw
                    if tw < 0 or tw % sw: continue
                    ow = tw // sw
                    if ow >= OW: continue
                    s += dcol[(((r*kh + k)*kw + j)*OH + oh)*OW + ow]
            dx[i_] = s
    close(dx, dxref, "conv dx")

conv_check(2, 4, 7, 6, 6, 1, 3, 3, 2, 1, 1, 1, 1, 1)
conv_check(2, 4, 8, 8, 6, 2, 3, 3, 1, 1, 2, 2, 2, 2)
conv_check(2, 8, 5, 5, 4, 1, 1, 1, 1, 1, 0, 0, 1, 1)
conv_check(1, 6, 9, 9, 6, 3, 2, 3, 2, 2, 0, 1, 1, 2)
conv_check(3, 4, 6, 5, 6, 2, 3, 3, 1, 2, 1, 0, 1, 1)  # two chunks of the weight gradient (2 + 1)

# ---- linear / matmul -----------------------------------------------------------------------
M, IN, OUT = 5, 7, 4
x = rnd(M*IN); w = rnd(OUT*IN); dy = rnd(M*OUT)
y = [0.0]*(M*OUT); gemm(False, True, M, OUT, IN, 1.0, x, 0, IN, 0, w, 0, IN, 0, 0.0, y, 0, OUT, 0, 1)
close(y, [sum(x[m*IN+i]*w[o*IN+i] for i in range(IN)) for m in range(M) for o in range(OUT)], "linear y")
dx = [0.0]*(M*IN); gemm(False, False, M, IN, OUT, 1.0, dy, 0, OUT, 0, w, 0, IN, 0, 0.0, dx, 0, IN, 0, 1)
close(dx, [sum(dy[m*OUT+o]*w[o*IN+i] for o in range(OUT)) for m in range(M) for i in range(IN)], "linear dx")
dw = [0.0]*(OUT*IN); gemm(True, False, OUT, IN, M, 1.0, dy, 0, OUT, 0, x, 0, IN, 0, 1.0, dw, 0, IN, 0, 1)
close(dw, [sum(dy[m*OUT+o]*x[m*IN+i] for m in range(M)) for o in range(OUT) for i in range(IN)], "linear dw")
B_, m_, k_, n_ = 2, 3, 4, 5
a = rnd(B_*m_*k_); b = rnd(B_*k_*n_); dc = rnd(B_*m_*n_)
c = [0.0]*(B_*m_*n_); gemm(False, False, m_, n_, k_, 1.0, a, 0, k_, m_*k_, b, 0, n_, k_*n_, 0.0, c, 0, n_, m_*n_, B_)
close(c, [sum(a[(bb*m_+i)*k_+p]*b[(bb*k_+p)*n_+j] for p in range(k_)) for bb in range(B_) for i in range(m_) for j in range(n_)], "matmul c")
da = [0.0]*len(a); gemm(False, True, m_, k_, n_, 1.0, dc, 0, n_, m_*n_, b, 0, n_, k_*n_, 0.0, da, 0, k_, m_*k_, B_)
close(da, [sum(dc[(bb*m_+i)*n_+j]*b[(bb*k_+p)*n_+j] for j in range(n_)) for bb in range(B_) for i in range(m_) for p in range(k_)], "matmul da")
db = [0.0]*len(b); gemm(True, False, k_, n_, m_, 1.0, a, 0, k_, m_*k_, dc, 0, n_, m_*n_, 0.0, db, 0, n_, k_*n_, B_)
close(db, [sum(a[(bb*m_+i)*k_+p]*dc[(bb*m_+i)*n_+j] for i in range(m_)) for bb in range(B_) for p in range(k_) for j in range(n_)], "matmul db")

# ---- attention core (per sample n, batched over heads) ----------------------------------------
N, T, D, H = 2, 5, 6, 3; hd = D//H; scale = 1/math.sqrt(hd)
qkv = rnd(N*T*3*D); dO = rnd(N*T*D)
Q = lambda n,t,h,e: qkv[(n*T+t)*3*D + h*hd + e]; Kk = lambda n,t,h,e: qkv[(n*T+t)*3*D + D + h*hd + e]
V = lambda n,t,h,e: qkv[(n*T+t)*3*D + 2*D + h*hd + e]
Pm = [0.0]*(N*H*T*T); merged = [0.0]*(N*T*D)
for n in range(N):
    gemm(False, True, T, T, hd, scale, qkv, n*T*3*D, 3*D, hd, qkv, n*T*3*D + D, 3*D, hd, 0.0, Pm, n*H*T*T, T, T*T, H)
    for r in range(H*T):   # attn_softmax_k, causal
        i = r % T; base = n*H*T*T + r*T
        mx = max(Pm[base:base+i+1]); e = [math.exp(Pm[base+j]-mx) for j in range(i+1)]; s = sum(e)
        for j in range(T): Pm[base+j] = e[j]/s if j <= i else 0.0
    gemm(False, False, T, hd, T, 1.0, Pm, n*H*T*T, T, T*T, qkv, n*T*3*D + 2*D, 3*D, hd, 0.0, merged, n*T*D, D, hd, H)
ref = []
Pref = {}
for n in range(N):
    for t in range(T):
        for h in range(H):
            sc = [sum(Q(n,t,h,e)*Kk(n,u,h,e) for e in range(hd))*scale for u in range(t+1)]
            mx = max(sc); ex = [math.exp(v-mx) for v in sc]; s = sum(ex)
            Pref[(n,h,t)] = [v/s for v in ex] + [0.0]*(T-t-1)
for n in range(N):
    for t in range(T):
        for h in range(H):
            for e in range(hd):
                ref.append(sum(Pref[(n,h,t)][u]*V(n,u,h,e) for u in range(T)))
# ref order is n,t,h,e == merged layout [n,t,D] with D = h*hd+e
close(merged, ref, "attention merged")
# backward: dq, dk, dv against the derivative of sum(dO * merged)
dqkv = [0.0]*(N*T*3*D); dP = [0.0]*(H*T*T)
for n in range(N):
    gemm(False, True, T, T, hd, 1.0, dO, n*T*D, D, hd, qkv, n*T*3*D + 2*D, 3*D, hd, 0.0, dP, 0, T, T*T, H)
    gemm(True, False, T, hd, T, 1.0, Pm, n*H*T*T, T, T*T, dO, n*T*D, D, hd, 0.0, dqkv, n*T*3*D + 2*D, 3*D, hd, H)
    for r in range(H*T):
        base = r*T; p = Pm[n*H*T*T + base: n*H*T*T + base + T]
        dot = sum(dP[base+j]*p[j] for j in range(T))
        for j in range(T): dP[base+j] = p[j]*(dP[base+j]-dot)*scale
    gemm(False, False, T, hd, T, 1.0, dP, 0, T, T*T, qkv, n*T*3*D + D, 3*D, hd, 0.0, dqkv, n*T*3*D, 3*D, hd, H)
    gemm(True, False, T, hd, T, 1.0, dP, 0, T, T*T, qkv, n*T*3*D, 3*D, hd, 0.0, dqkv, n*T*3*D + D, 3*D, hd, H)
def loss(q):
    global qkv
    save = qkv; qkv = q; tot = 0.0
    for n in range(N):
        for t in range(T):
            for h in range(H):
                sc = [sum(Q(n,t,h,e)*Kk(n,u,h,e) for e in range(hd))*scale for u in range(t+1)]
                mx = max(sc); ex = [math.exp(v-mx) for v in sc]; s = sum(ex)
                for e in range(hd):
                    tot += dO[(n*T+t)*D + h*hd + e]*sum(ex[u]/s*V(n,u,h,e) for u in range(t+1))
    qkv = save; return tot
num = []
for i in range(len(qkv)):
    q1 = qkv[:]; q1[i] += 1e-6; q2 = qkv[:]; q2[i] -= 1e-6
    num.append((loss(q1) - loss(q2))/2e-6)
err = max(abs(a-b) for a, b in zip(num, dqkv))
failures += err >= 1e-6
print("%-22s max err %.2e %s" % ("attention dqkv (fd)", err, "ok" if err < 1e-6 else "FAIL"))
sys.exit(1 if failures else 0)
