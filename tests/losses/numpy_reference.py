"""Independent NumPy (float64, per-anchor loops) transcriptions of the loss formulas of the
papers (Chen et al. 2020; Chuang et al. 2020; Robinson et al. 2021; Wu et al. 2021;
Tabassum et al. 2022), in the project's conventions (the anchor/positive/negative sets stated
in :mod:`keras_hardneg.losses.core`). Written from the formulas, not from the library code."""

import math

import numpy as np


def _unit(x):
    x = np.asarray(x, np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def in_batch_triples(z1, z2):
    """Yields (anchor index, positive index, negative indices) over 2B anchors, and the unit rows."""
    z = _unit(np.concatenate([z1, z2]))
    b = len(z1)
    triples = []
    for a in range(2 * b):
        p = (a + b) % (2 * b)
        triples.append((a, p, [j for j in range(2 * b) if j not in (a, p)]))
    return z, triples


def ntxent(pos, neg, t, **_):
    return -math.log(math.exp(pos) / (math.exp(pos) + np.exp(neg).sum()))


def debiased(pos, neg, t, tau_plus, **_):
    n = len(neg)
    ng = max((np.exp(neg).sum() - tau_plus * n * math.exp(pos)) / (1 - tau_plus), n * math.exp(-1 / t))
    return -math.log(math.exp(pos) / (math.exp(pos) + ng))


def hard(pos, neg, t, tau_plus, beta, **_):
    n = len(neg)
    imp = np.exp(beta * neg)
    r = (imp * np.exp(neg)).sum() / imp.mean()
    ng = max((r - tau_plus * n * math.exp(pos)) / (1 - tau_plus), n * math.exp(-1 / t))
    return -math.log(math.exp(pos) / (math.exp(pos) + ng))


def ring(pos, neg, t, lower, upper, **_):
    n = len(neg)
    ranked = np.sort(neg)[::-1]
    band = ranked[int(np.floor(lower / 100 * n)):int(np.floor(upper / 100 * n))]
    return -math.log(math.exp(pos) / (math.exp(pos) + np.exp(band).sum()))


def weighted(pos, neg, t, tau_plus, w, **_):
    """Debiased loss with explicit per-negative weights w (mean 1)."""
    n = len(neg)
    r = (w * np.exp(neg)).sum()
    ng = max((r - tau_plus * n * math.exp(pos)) / (1 - tau_plus), n * math.exp(-1 / t))
    return -math.log(math.exp(pos) / (math.exp(pos) + ng))


# ---- the weight each negative receives (R_a = sum_j w_aj e^{s_aj}) ----------------

def hard_weights(neg, beta):
    """Robinson et al.'s importance weights over one anchor's negatives: imp / mean(imp)."""
    imp = np.exp(beta * np.asarray(neg, np.float64))
    return imp / imp.mean()


def ring_weights(neg, lower, upper):
    """1 for the negatives of rank [floor(lower N), floor(upper N)) (most similar first)."""
    neg = np.asarray(neg, np.float64)
    n = len(neg)
    order = np.argsort(-neg, kind="stable")
    w = np.zeros(n)
    w[order[int(np.floor(lower / 100 * n)):int(np.floor(upper / 100 * n))]] = 1.0
    return w


def effective_number(w):
    """Kish's effective sample size 1 / sum(wn^2), wn = w / sum(w)."""
    w = np.asarray(w, np.float64)
    wn = w / w.sum()
    return 1.0 / np.sum(wn ** 2)


def in_batch_loss(fn, z1, z2, t, **kw):
    z, triples = in_batch_triples(z1, z2)
    vals = [fn(z[a] @ z[p] / t, z[negs] @ z[a] / t, t, **kw) for a, p, negs in triples]
    return float(np.mean(vals))


def queue_loss(fn, q, k, queue, t, **kw):
    q, k, queue = _unit(q), _unit(k), _unit(queue)
    vals = [fn(q[i] @ k[i] / t, queue @ q[i] / t, t, **kw) for i in range(len(q))]
    return float(np.mean(vals))


# ---- UnReMix -----------------------------------------------------------------

def _ce_pseudo_label(zj, pool_units, eps=0.0):
    """Cross entropy of softmax_k(cos(z_k, z_j)) against its own argmax (Eq. 2-3)."""
    uj = zj / np.linalg.norm(zj)
    logits = pool_units @ uj
    label = int(np.argmax(logits))
    m = logits.max()
    return -(logits[label] - m - math.log(np.exp(logits - m).sum()))


def numeric_output_gradient(zj, pool_units, h=1e-6):
    """dCE/dz_j by central finite differences (other pool rows fixed)."""
    g = np.zeros_like(zj)
    for c in range(len(zj)):
        d = np.zeros_like(zj)
        d[c] = h
        g[c] = (_ce_pseudo_label(zj + d, pool_units) - _ce_pseudo_label(zj - d, pool_units)) / (2 * h)
    return g


def last_layer_gradient(e, h):
    """Gradient w.r.t. (W, b) of z = W h + b, flattened: (outer(e, h), e)."""
    if h is None:
        return e
    return np.concatenate([np.outer(e, h).ravel(), e])


def _mean_one(x):
    x = np.maximum(x, 0.0)
    m = x.mean()
    return x / m if m > 1e-12 else np.ones_like(x)


def unremix_in_batch(z1, z2, t, tau_plus, beta, weights, f1=None, f2=None,
                     return_weights=False):
    """The in-batch UnReMix loss (and, with ``return_weights``, each anchor's ``w`` over its
    negatives in the order of :func:`in_batch_triples`)."""
    raw = np.concatenate([z1, z2]).astype(np.float64)
    z, triples = in_batch_triples(z1, z2)
    feats = None if f1 is None else np.concatenate([f1, f2]).astype(np.float64)
    grads = []
    for j in range(len(raw)):
        pool = np.delete(z, j, axis=0)
        e = numeric_output_gradient(raw[j], pool)
        grads.append(last_layer_gradient(e, None if feats is None else feats[j]))
    grads = np.array(grads)
    lu, ls, lr = np.asarray(weights, np.float64) / np.sum(weights)
    vals, all_w = [], []
    for a, p, negs in triples:
        pos = z[a] @ z[p] / t
        neg = z[negs] @ z[a] / t
        u = np.array([grads[a] @ grads[j] for j in negs])
        s = np.exp(beta * neg)
        r = np.array([np.mean([1 - z[j] @ z[jj] for jj in negs if jj != j]) for j in negs])
        w = lu * _mean_one(u) + ls * s / s.mean() + lr * _mean_one(r)
        vals.append(weighted(pos, neg, t, tau_plus, w))
        all_w.append(w)
    if return_weights:
        return float(np.mean(vals)), all_w
    return float(np.mean(vals))


def unremix_queue(q, k, queue, t, tau_plus, beta, weights, fq=None, fqueue=None):
    raw_q, raw_n = np.asarray(q, np.float64), np.asarray(queue, np.float64)
    uq, uk, un = _unit(q), _unit(k), _unit(queue)
    pool = np.concatenate([uq, uk])
    gq = [last_layer_gradient(numeric_output_gradient(raw_q[i], np.delete(pool, i, axis=0)),
                              None if fq is None else fq[i]) for i in range(len(q))]
    gn = [last_layer_gradient(numeric_output_gradient(raw_n[j], pool),
                              None if fqueue is None else fqueue[j]) for j in range(len(queue))]
    lu, ls, lr = np.asarray(weights, np.float64) / np.sum(weights)
    kk = len(queue)
    r = np.array([np.mean([1 - un[j] @ un[jj] for jj in range(kk) if jj != j]) for j in range(kk)])
    vals = []
    for i in range(len(q)):
        pos = uq[i] @ uk[i] / t
        neg = un @ uq[i] / t
        u = np.array([gq[i] @ gn[j] for j in range(kk)])
        s = np.exp(beta * neg)
        w = lu * _mean_one(u) + ls * s / s.mean() + lr * _mean_one(r)
        vals.append(weighted(pos, neg, t, tau_plus, w))
    return float(np.mean(vals))


# ---- mined negatives (retrieval tuples) ----------------------------------------------
# Written from sentence-transformers' documented behaviour (MultipleNegativesRankingLoss and
# its symmetric variant, the additive hardness, GISTEmbedLoss's guard), one anchor at a time.

def mined_candidates(q, p, n, in_batch=True, symmetric=False):
    """Per anchor ``(anchor, positive, [(negative, kind, (example, slot))])`` over unit rows:
    kind ``"own"`` (the query's own mined negative), ``"batch"`` (another example's positive or
    mined negative) or ``"reverse"`` (a document anchor's other queries). ``slot``: ``"p"``,
    ``"q"`` or the negative's index ``k``. Queries first, then (symmetric) the documents."""
    b, k = n.shape[0], n.shape[1]
    out = []
    for i in range(b):
        negs = []
        if in_batch:
            negs += [(j, "p") for j in range(b) if j != i]
            negs += [(j, kk) for j in range(b) for kk in range(k)]
        else:
            negs += [(i, kk) for kk in range(k)]
        out.append((("q", i), ("p", i), [(s, "own" if s[0] == i and s[1] != "p" else "batch")
                                           for s in negs]))
    if symmetric:
        for i in range(b):
            out.append((("p", i), ("q", i), [((j, "q"), "reverse") for j in range(b) if j != i]))
    return out


def _row(q, p, n, ref):
    """The unit row named by ``ref``: ``("q", i)`` / ``("p", i)`` or ``(example, slot)``."""
    if ref[0] in ("q", "p"):
        kind, i = ref
    else:
        i, kind = ref
    z = q[i] if kind == "q" else p[i] if kind == "p" else n[i, kind]
    z = np.asarray(z, np.float64)
    return z / np.linalg.norm(z)


def mined_losses(fn, q, p, n, t, in_batch=True, symmetric=False, strength=0.0, mode=None,
                 guide=None, margin=0.0, strategy="absolute", **kw):
    """Per-anchor losses (float64) of ``fn(pos, neg, t, **kw)`` on mined tuples: hardness adds
    ``strength * cos`` to the logits of the query's negatives ``mode`` selects; ``guide``
    ``(gq, gp, gn)`` drops negatives whose guide cosine exceeds the guide positive's minus
    the margin. An anchor left without negatives has loss 0."""
    chosen = {None: (), "hard_negatives": ("own",), "in_batch_negatives": ("batch",),
              "all_negatives": ("own", "batch")}[mode]
    vals = []
    for a_ref, p_ref, negs in mined_candidates(q, p, n, in_batch, symmetric):
        a, pos = _row(q, p, n, a_ref), _row(q, p, n, p_ref)
        if guide is not None:
            ga, gpos = _row(*guide, a_ref), _row(*guide, p_ref)
            g = ga @ gpos
            threshold = g - margin if strategy == "absolute" else g - abs(g) * margin
            negs = [(ref, kind) for ref, kind in negs if ga @ _row(*guide, ref) <= threshold]
        logits = []
        for ref, kind in negs:
            cos = a @ _row(q, p, n, ref)
            logits.append(cos / t + (strength * cos if kind in chosen else 0.0))
        vals.append(0.0 if not logits else fn(a @ pos / t, np.array(logits), t, **kw))
    return np.array(vals)
