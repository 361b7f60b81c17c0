"""The grouped execution engine of MemN2N / t-MEM-NN: K runs (tasks, seeds, or weight draws as pseudo-runs)
in one vectorised pass.

It computes the function of the readable model in memnet.model (`MemN2N`, the thesis's equations; a test keeps
the two equal) at a fraction of its cost: each run's distinct sentences embedded once per step by one sparse
product (or only the rows a batch reads), the memory read slot by slot or against each run's whole sentence
table, only the slots some story fills computed (the empty ones enter the softmax as one logit, in one of five
ways, see `memory_hops`), and the hops and the Student-t draw run op by op or as compiled kernels.
Shapes: K runs, B questions per run, M memory slots, L words per sentence, V vocabulary rows, d = delta.
The vocabulary rows are [nil, words..., padding..., time_1 .. time_M]: rows past a run's own vocabulary are
masked, so a run trained in a group computes exactly what it computes alone.
"""

from __future__ import annotations

import math
import warnings

import torch
from torch import nn
from torch.nn import functional as F

from nlpbench.memnet.model import MemNetConfig
from nlpbench.nn.gaussian import GaussianMatrix
from nlpbench.nn.kernels import check as check_kernels, resolve as resolve_kernels, run_as
from nlpbench.nn.position import position_weights, position_weights_code, position_weights_code_published
from nlpbench.nn.student_t import StudentTMatrix


HOP_KERNELS_KEY = "model.hop_kernels"     # the setting that runs the memory hops op by op or compiled, named in errors
BATCH_ROWS_SHARE = 0.5   # a pass embeds only the rows its batch reads when they are at most this share of the table


class _SparseMM(torch.autograd.Function):
    """P X for a fixed sparse P, with its precomputed transpose for the backward pass (torch's own sparse
    backward would re-sort the indices at every step)."""

    @staticmethod
    def forward(ctx, X, P, P_T):
        ctx.P_T = P_T
        return _spmm(P, X)

    @staticmethod
    def backward(ctx, grad):
        return _spmm(ctx.P_T, grad), None, None


def _csr_rows(P: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """The rows `rows` (sorted) of a sparse CSR matrix, each row's entries in their order: a CSR matrix."""
    crow, col, val = P.crow_indices(), P.col_indices(), P.values()
    start, length = crow[rows], crow[rows + 1] - crow[rows]
    new_crow = torch.zeros(len(rows) + 1, dtype=crow.dtype, device=crow.device)
    torch.cumsum(length, 0, out=new_crow[1:])
    entry = torch.repeat_interleave(start - new_crow[:-1], length) + torch.arange(int(new_crow[-1]), device=crow.device)
    with warnings.catch_warnings():      # "sparse CSR support is in beta"
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(new_crow, col[entry], val[entry], (len(rows), P.shape[1]))


def _spmm(P: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """P X for sparse CSR P (or CSC: a CSR matrix's transpose). On a CPU it is written straight into its output (there torch.sparse.mm adds a zero
    fill and a copy of the result, a third of its time here)."""
    if X.device.type != "cpu":
        return torch.sparse.mm(P, X)
    out = torch.empty(P.shape[0], X.shape[1], dtype=X.dtype)
    return torch.addmm(out, P, X.contiguous(), beta=0, out=out)     # beta = 0: `out`'s contents are ignored


def memory_hops(u: torch.Tensor, memory: dict[str, torch.Tensor], time_rows: dict[str, torch.Tensor],
                story_ids: torch.Tensor, rev: torch.Tensor, filled: torch.Tensor, extra: torch.Tensor | None,
                count: torch.Tensor, nil: dict[str, torch.Tensor] | None, *, hops: tuple[tuple[str, str], ...],
                whole_tables: bool, temporal: bool, empty_slots: str, attention: bool
                ) -> tuple[torch.Tensor, tuple[tuple[torch.Tensor, torch.Tensor | None], ...]]:
    """The K hops of eqs. 33-35 from u^1 (K, B, d): returns u^{K+1} = o^K + u^K, and with `attention` each hop's
    (varpi over the computed slots, the weight of one empty slot or None).

    memory[E]: matrix E's memory, either each slot's row gathered, (K, B, M_used, d), or each run's whole sentence
    table, (K, U, d), read through story_ids (K, B, M_used) (`whole_tables`); time_rows[E] (K, M_used, d): T_E;
    slot i holds time row rev (K, B, M_used); `filled` marks the slots that hold a fact. The slots past the
    computed ones (`empty_slots`): "longest_story" (extra (K, B, 1) = log of each story's empty slots, the unfilled
    computed slots masked), "count" (extra = log of their count, `count`), "learned_nil" (they hold the nil
    sentence's rows nil[E]; extra = log count), "masked" (dropped) or "none". A plain function of tensors, so that
    GroupedMemNet can run it op by op or compiled (`model.hop_kernels`)."""
    if whole_tables:
        # u^T against every sentence of the run's table in one product, then each slot picks its sentence's score;
        # sum_i p_i c_i as each sentence's summed weight times its row (the gathered slots' numbers up to float
        # summation order; cheaper where the stories are long next to the table: GroupTrainer chooses per bucket)
        def match(u, a):                                                # u^T m_i
            return torch.gather(torch.bmm(u, memory[a].transpose(1, 2)), 2, story_ids)

        def weigh(p, c):                                                # sum_i p_i c_i
            return torch.bmm(p.new_zeros(*p.shape[:2], memory[c].shape[1]).scatter_add_(2, story_ids, p), memory[c])
    else:
        def match(u, a):                                                # u^T m_i (elementwise: 2x a batched bmm here)
            return (memory[a] * u.unsqueeze(2)).sum(-1)

        def weigh(p, c):                                                # sum_i p_i c_i
            return (p.unsqueeze(-1) * memory[c]).sum(2)

    M_used = filled.shape[-1]
    per_hop = []
    for a, c in hops:
        scores = match(u, a)                                            # u^T m_i
        if temporal:
            scores = scores + GroupedMemNet._time_scores(u, time_rows[a], rev, filled)
        p_empty = None
        if empty_slots == "longest_story":
            p_all = torch.softmax(torch.cat([scores.masked_fill(~filled, float("-inf")), extra], -1), dim=-1)
            p = p_all[..., :M_used]                                     # eq. 33 over the run's slots
        elif empty_slots == "learned_nil":
            extra_nil = (nil[a].unsqueeze(1) * u).sum(-1, keepdim=True) + extra
            p_all = torch.softmax(torch.cat([scores, extra_nil], -1), dim=-1)   # eq. 33 over all M slots
            p, p_empty = p_all[..., :M_used], p_all[..., M_used:] / count
        elif empty_slots == "masked":
            p = torch.softmax(scores.masked_fill(~filled, -1e30), dim=-1)       # eq. 33: varpi_i
        elif empty_slots == "count":
            p_all = torch.softmax(torch.cat([scores, extra], -1), dim=-1)      # eq. 33 over all M slots
            p, p_empty = p_all[..., :M_used], p_all[..., M_used:] / count
        else:
            p = torch.softmax(scores, dim=-1)                                  # eq. 33
        o = weigh(p, c)                                                 # eq. 35: o = sum_i varpi_i c_i (empty: c_i = 0)
        if temporal:
            o = o + GroupedMemNet._time_output(p, time_rows[c], rev, filled)
        u = u + o                                                       # u^{k+1} = u^k + o^k
        if empty_slots == "learned_nil":
            u = u + count * p_empty * nil[c].unsqueeze(1)               # the empty slots' c_0
        if attention:
            per_hop.append((p, p_empty))
    return u, tuple(per_hop)


class GroupedMemNet(nn.Module):
    """MemN2N (bayesian=False) or t-MEM-NN (bayesian=True) for K runs at once: memnet.model.MemN2N's function,
    run by run."""

    def __init__(self, cfg: MemNetConfig, vocab_sizes: list[int], generators: list[torch.Generator],
                 time_rows: list[int] | None = None):
        super().__init__()
        self.cfg = cfg
        K, V, d = len(vocab_sizes), cfg.n_rows, cfg.embedding_dim
        if cfg.position_form not in ("paper", "code", "code_published"):
            raise ValueError(f"model.position_form: unknown value {cfg.position_form!r} "
                             "(expected 'paper', 'code' or 'code_published')")
        if cfg.nil_row not in ("zero", "learned"):
            raise ValueError(f"model.nil_row: unknown value {cfg.nil_row!r} (expected 'zero' or 'learned')")
        if cfg.posterior not in ("student_t", "gaussian"):
            raise ValueError(f"model.posterior: unknown value {cfg.posterior!r} (expected 'student_t' or 'gaussian')")
        check_kernels(cfg.hop_kernels, HOP_KERNELS_KEY)
        self._hop_kernels_on: dict[str, str] = {}
        rows = torch.arange(V)
        words = torch.stack([(rows >= 1) & (rows < n) for n in vocab_sizes])          # (K, V) answer rows
        self.register_buffer("word_rows", words)
        if cfg.nil_row == "learned":
            words = words | (rows == 0).unsqueeze(0)                                    # + the nil row
        with_time = words | (rows >= cfg.n_words).unsqueeze(0)                          # + time rows
        # Each run's real rows: nil + its own words, then the time rows. Initial values (and sampling noise, below)
        # are drawn for a run's own rows only, from the run's own generator, so grouping never changes a run.
        self.rows = [torch.cat([torch.arange(n), torch.arange(cfg.n_words, V)]) for n in vocab_sizes]
        # Sampling noise is drawn only for rows a forward pass can read: B's words (B has no time rows), and for
        # A and C (and every adjacent E_k: E_0 is B and A^1) the words and the time rows of the run's longest
        # story (`time_rows`, default all M): the other rows never reach the loss, and skipping their draws
        # halves the cost of sampling.
        T = time_rows or [cfg.memory_size] * len(vocab_sizes)
        if cfg.memory_slots not in ("fixed", "longest_story"):
            raise ValueError(f"model.memory_slots: unknown value {cfg.memory_slots!r} (expected 'fixed' or 'longest_story')")
        self.register_buffer("slots", torch.tensor([min(t, cfg.memory_size) for t in T]))   # per run (longest_story)
        noise_rows = {"B": [torch.arange(n) for n in vocab_sizes]}
        read = [torch.cat([torch.arange(n), cfg.n_words + torch.arange(min(t, cfg.memory_size))])
                for n, t in zip(vocab_sizes, T)]

        def init(total: int, rows_of) -> torch.Tensor:
            out = torch.zeros(K, total, d)
            for k, g in enumerate(generators):
                rows = rows_of(k)
                out[k, rows] = torch.randn(len(rows), d, generator=g) * cfg.init_std   # N(0, 0.1^2) (§6.4.1)
            return out

        names = cfg.matrix_names()
        masks = [words if name == "B" else with_time for name in names]
        if cfg.bayesian:
            # one posterior module over every matrix of every run: (K, n, V, d), a slot per (run, matrix)
            mu = torch.stack([init(V, self.rows.__getitem__) for _ in names], 1)
            mask = torch.stack(masks, 1)                                                # (K, n, V)
            slot_rows = [noise_rows.get(name, read)[k] for k in range(K) for name in names]   # run-major
            if cfg.posterior == "gaussian":
                self.posterior = GaussianMatrix(mu, mask, slot_rows, cfg.sigma_init, cfg.prior_sigma)
            else:
                self.posterior = StudentTMatrix(mu, mask, slot_rows, cfg.sigma_init, cfg.dof_init, cfg.dof_min,
                                                cfg.t_sampler, cfg.posterior_kernels)
        else:
            self.params = nn.ParameterDict()
            for name, mask in zip(names, masks):
                self.params[name] = nn.Parameter(init(V, self.rows.__getitem__))
                self.register_buffer(f"mask_{name}", mask.to(torch.float32).unsqueeze(-1))
        if cfg.tying == "layerwise":
            # W is a point estimate in both models (eq. 36): V x delta over the word rows.
            self.W = nn.Parameter(init(cfg.n_words, lambda k: torch.arange(vocab_sizes[k])))

    @property
    def hop_kernels_used(self) -> str:
        """"eager" or "compiled": how `memory_hops` runs on this model's device (`model.hop_kernels`, nn.kernels)."""
        device = self.word_rows.device
        if device.type not in self._hop_kernels_on:
            self._hop_kernels_on[device.type] = resolve_kernels(self.cfg.hop_kernels, device, HOP_KERNELS_KEY)
        return self._hop_kernels_on[device.type]

    # -- weights ---------------------------------------------------------------------------------------
    def _slot_generators(self, generators: list[torch.Generator]) -> list[torch.Generator]:
        """Each run's generator once per matrix of the run (the posterior's slots, run-major)."""
        n = len(self.cfg.matrix_names())
        return [g for g in generators for _ in range(n)]

    def draw(self, generators: list[torch.Generator] | None, mode: str) -> dict[str, torch.Tensor]:
        """The embedding matrices for one forward pass: mode 'mean', 'escort' (training) or 'posterior'."""
        if not self.cfg.bayesian:
            return {n: p * getattr(self, f"mask_{n}") for n, p in self.params.items()}
        if mode == "mean":
            w = self.posterior.mean()
        else:
            w = self.posterior.sample(self._slot_generators(generators), escort=(mode == "escort"))
        return dict(zip(self.cfg.matrix_names(), w.unbind(1)))             # (K, n, V, d) -> n of (K, V, d)

    def draws(self, generators: list[torch.Generator] | None, mode: str, n: int, batched: bool
              ) -> dict[str, torch.Tensor]:
        """n weight draws side by side, (n K, V, d) per matrix, draw-major (draw s of run k at s K + k).
        batched=False: n calls of `draw`, the same numbers in the same order; True: one generator call per
        run and matrix for all n draws (the same distribution, other numbers, far fewer small calls)."""
        if not self.cfg.bayesian or mode == "mean":
            return {name: w.repeat(n, 1, 1) for name, w in self.draw(generators, mode).items()}
        if not batched:
            one_by_one = [self.draw(generators, mode) for _ in range(n)]
            return {name: torch.cat([w[name] for w in one_by_one]) for name in one_by_one[0]}
        w = self.posterior.samples(self._slot_generators(generators), mode == "escort", n)   # (n, K, n_mat, V, d)
        return {name: w[:, :, m].flatten(0, 1) for m, name in enumerate(self.cfg.matrix_names())}

    def divergence(self, prior_nu: torch.Tensor | None) -> torch.Tensor:
        """sum over the stochastic matrices (A, B, C; or E_0..E_K under adjacent tying) of D_t(q(Theta) || p(Theta))
        (eq. 55), per run: (K,). prior_nu (K,) or None: each prior shares its posterior's nu_Theta."""
        n = len(self.cfg.matrix_names())
        per_run = None if prior_nu is None else prior_nu.reshape(-1, 1).expand(-1, n)
        return self.posterior.divergence(per_run).sum(1)

    def dof(self) -> dict[str, torch.Tensor]:
        if not self.cfg.bayesian or self.cfg.posterior != "student_t":
            return {}
        nu = self.posterior.nu.detach()
        return {name: nu[:, m] for m, name in enumerate(self.cfg.matrix_names())}

    # -- forward ---------------------------------------------------------------------------------------
    def _position_values(self, tokens: torch.Tensor, lengths: torch.Tensor, widths: torch.Tensor | None
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """For sentences tokens (K, U, W): which positions hold words (`present`), and the weights l_j = a_j +
        (k/d) b_j of their words, zero elsewhere (without position encoding: a = 1 per word, b None). With a
        learned nil row every sentence is padded to its run's data width (`widths`, (K,)) and J is that width:
        the padding positions are nil words."""
        K, U, W = tokens.shape
        if self.cfg.nil_row == "learned":
            lengths = widths.view(K, 1).expand(K, U)
            present = torch.arange(W, device=tokens.device) < lengths.unsqueeze(-1)
        else:
            present = tokens != 0
        if not self.cfg.position_encoding:
            return present, present.to(torch.float32), None
        if self.cfg.position_form == "code":
            a, b = position_weights_code(widths.view(K, 1).expand(K, U), W, self.cfg.embedding_dim)
        elif self.cfg.position_form == "code_published":
            a, b = position_weights_code_published(widths.view(K, 1).expand(K, U), W, self.cfg.embedding_dim,
                                                   self.cfg.temporal_encoding)
        else:
            a, b = position_weights(lengths, W, self.cfg.embedding_dim)
        return present, a, b

    def sentence_bags(self, tokens: torch.Tensor, lengths: torch.Tensor, widths: torch.Tensor | None = None,
                      counts: torch.Tensor | None = None, rows_per_run: int | None = None) -> dict[str, torch.Tensor]:
        """Each run's table of distinct sentences, tokens (K, U, W) padded to the longest table, as one sparse
        matrix built once per data set. Run k's table has counts[k] real rows (default: all U); the padding rows
        are left out, so the embedded tables lie run after run in one flat table (sum_k counts[k] rows), run k's
        starting at row offsets[k]. With `rows_per_run` every run's table is padded to that many rows (zero rows
        past its own), so the flat table is (K, rows_per_run) tables and `forward` reads it by products with
        whole tables (see `forward`).

        With l_kj = a_j + (k/d) b_j, sum_j l_j E x_j = P_a E + P_b (E diag(k/d)) = [P_a | P_b] [E ; E diag(k/d)]:
        row offsets[k] + u of P holds the weights a_j of run k's sentence u's words at columns k V + word and b_j
        at columns K V + k V + word (without position encoding: word counts, and no P_b half)."""
        K, U, W = tokens.shape
        counts = torch.full((K,), U, device=tokens.device) if counts is None else counts.to(tokens.device)
        if rows_per_run is None:
            offsets = torch.cumsum(counts, 0) - counts
            R = int(counts.sum())
        else:
            offsets = torch.arange(K, device=tokens.device) * rows_per_run
            R = K * rows_per_run
        present, a, b = self._position_values(tokens, lengths, widths)
        present = present & (torch.arange(U, device=tokens.device).view(1, U) < counts.view(K, 1)).unsqueeze(-1)
        col = (tokens + torch.arange(K, device=tokens.device).view(K, 1, 1) * self.cfg.n_rows)[present]
        row = (offsets.view(K, 1, 1) + torch.arange(U, device=tokens.device).view(1, U, 1)).expand(K, U, W)[present]
        if b is not None:
            values = torch.cat([a[present], b[present]])
            row, col = torch.cat([row, row]), torch.cat([col, col + K * self.cfg.n_rows])
            size = (R, 2 * K * self.cfg.n_rows)
        else:
            values = a[present]
            size = (R, K * self.cfg.n_rows)

        def csr(r, c, shape):
            with warnings.catch_warnings():      # "sparse CSR support is in beta": mm and its transpose suffice
                warnings.simplefilter("ignore", UserWarning)
                return torch.sparse_coo_tensor(torch.stack([r, c]), values, shape,
                                               check_invariants=False).coalesce().to_sparse_csr()

        return {"offsets": offsets, "P": csr(row, col, size), "P_T": csr(col, row, size[::-1]),
                "rows_per_run": rows_per_run}

    def word_weights(self, tables: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Sentence tables tokens (T, U, W), len (T, U), width (T,) with every word's weights beside it, for
        `own_sentences`: {"tokens", "weights" (T, U, 2, W): a_j and b_j (without position encoding (T, U, 1, W):
        1 per word)}."""
        _, a, b = self._position_values(tables["tokens"], tables["len"], tables["width"])
        return {"tokens": tables["tokens"], "weights": torch.stack([a] if b is None else [a, b], 2)}

    def own_sentences(self, tables: dict[str, torch.Tensor], table_of_run: torch.Tensor,
                      batch: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """A batch's own sentences as a small table of their own, for answering a few questions: embedding
        them costs what the batch reads, where `sentence_bags` embeds a run's whole table of distinct sentences
        at every pass (cheaper for a full batch, whose stories share sentences). `tables`: word_weights(...);
        run k reads table table_of_run[k]. Returns the sentences for `forward` and the batch with its ids into
        them: row 0 is the nil sentence, then the B queries, then the B x M_used story slots (the M - M_used
        slots past every story's facts read row 0). The same numbers as the whole table up to the order of
        floating-point sums."""
        story_ids, query_ids, n_facts = batch["story_ids"], batch["query_ids"], batch["n_facts"]
        K, B = query_ids.shape
        M_used = max(int(n_facts.max()), 1)
        ids = torch.cat([torch.zeros_like(query_ids[:, :1]), query_ids, story_ids[..., :M_used].reshape(K, -1)], 1)
        at = (table_of_run.view(K, 1), ids)
        local = torch.arange(1, 1 + B * (1 + M_used), device=ids.device)
        slots = F.pad(local[B:].view(B, M_used), (0, story_ids.shape[2] - M_used))   # still M slots: empty ones count
        own = {**batch, "query_ids": local[:B].expand(K, B), "story_ids": slots.expand(K, *slots.shape)}
        return {"tokens": tables["tokens"][at], "weights": tables["weights"][at]}, own

    def _embed(self, X: torch.Tensor, sentences: dict[str, torch.Tensor], rows: torch.Tensor | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """sum_j l_j E x_j for every sentence of every run and every matrix E at once: X (K, V, n d) holds n
        matrices side by side. Returns the runs' tables flat, (rows, n d), and where each run's starts (K,).
        `sentences`: {"bags": sentence_bags(...)} (one sparse product over the whole table) or
        own_sentences(...)[0] (the words gathered, then weighted). `rows` (sorted flat row ids, bags only):
        embed only those rows of the flat table, in that order (each row the same numbers, and so are the
        gradients: the other rows would add exact zeros)."""
        K, V, nd = X.shape
        d = self.cfg.embedding_dim
        if "bags" not in sentences:
            starts = self._starts(K, V, X.device)
            words = self._rows(X.reshape(K * V, nd), starts, sentences["tokens"])   # (K, U, W, n d)
            ab = sentences["weights"] @ words                           # (K, U, 2, n d): sum_j a_j E x_j, sum_j b_j E x_j
            U = ab.shape[1]
            if ab.shape[2] == 1:
                return ab[:, :, 0].reshape(K * U, nd), self._starts(K, U, X.device)
            dk = (torch.arange(1, d + 1, device=X.device, dtype=X.dtype) / d).repeat(nd // d)   # k/d, k = 1..d
            return (ab[:, :, 0] + ab[:, :, 1] * dk).reshape(K * U, nd), self._starts(K, U, X.device)
        bags = sentences["bags"]
        flat = X.reshape(K * V, nd)
        if self.cfg.position_encoding:
            dk = (torch.arange(1, d + 1, device=X.device, dtype=X.dtype) / d).repeat(nd // d)   # k/d, k = 1..d
            flat = torch.cat([flat, flat * dk])
        if rows is not None:
            P = _csr_rows(bags["P"], rows)
            return _SparseMM.apply(flat, P, P.t()), bags["offsets"]
        return _SparseMM.apply(flat, bags["P"], bags["P_T"]), bags["offsets"]

    def _batch_rows(self, sentences: dict, story_ids: torch.Tensor, query_ids: torch.Tensor, with_queries: bool
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None] | None:
        """Where a batch reads few of its runs' table rows (a joint model's table holds every task's sentences):
        the distinct flat rows its slots (and with_queries, its queries) read, sorted, and where each slot and
        query finds its row among them; None where embedding the whole table costs less (or the table is read
        whole, or a learned nil row needs each table's row 0). On a CPU only, whose sparse product takes the
        transposed rows (CSC) as they are; a GPU embeds the whole table."""
        if ("bags" not in sentences or sentences["bags"]["rows_per_run"] is not None or self.cfg.nil_row != "zero"
                or story_ids.device.type != "cpu"):
            return None
        bags = sentences["bags"]
        K = story_ids.shape[0]
        slots = (story_ids + bags["offsets"].view(K, 1, 1)).reshape(-1)
        ids = torch.cat([slots, (query_ids + bags["offsets"].view(K, 1)).reshape(-1)]) if with_queries else slots
        if ids.numel() > BATCH_ROWS_SHARE * bags["P"].shape[0]:       # at least as many reads as rows: embed all
            return None
        rows, at = torch.unique(ids, sorted=True, return_inverse=True)
        if rows.numel() > BATCH_ROWS_SHARE * bags["P"].shape[0]:
            return None
        return rows, at[:slots.numel()], at[slots.numel():] if with_queries else None

    @staticmethod
    def _starts(K: int, U: int, device) -> torch.Tensor:
        """Where each run's rows start in a flat table of K tables of U rows each."""
        return torch.arange(K, device=device) * U

    @staticmethod
    def _rows(table: torch.Tensor, starts: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Row ids (K, ...) of each run's own rows of a flat table (rows, d), run k's starting at starts[k]
        -> (K, ..., d)."""
        K, d = ids.shape[0], table.shape[1]
        flat = (ids + starts.view((K,) + (1,) * (ids.dim() - 1))).reshape(-1)
        return table.index_select(0, flat).view(ids.shape + (d,))   # backward: one index_add

    @staticmethod
    def _time_scores(u: torch.Tensor, T: torch.Tensor, rev: torch.Tensor, filled: torch.Tensor) -> torch.Tensor:
        """u^T T_A(i) for every slot i (K, B, M_used): u against the time rows T (K, M_used, d) in one product,
        then each slot picks its time row rev (K, B, M_used); empty slots have no time row (0)."""
        return torch.gather(torch.bmm(u, T.transpose(1, 2)), 2, rev).masked_fill(~filled, 0.0)

    @staticmethod
    def _time_output(p: torch.Tensor, T: torch.Tensor, rev: torch.Tensor, filled: torch.Tensor) -> torch.Tensor:
        """sum_i p_i T_C(i) (K, B, d): each slot's weight moved onto its time row, then one product with the time
        rows T (K, M_used, d). The slot of time row j is rev at position j (the reversal is its own inverse)."""
        return torch.bmm(torch.gather(p, 2, rev).masked_fill(~filled, 0.0), T)

    def forward(self, batch: dict[str, torch.Tensor], weights: dict[str, torch.Tensor],
                sentences: dict[str, torch.Tensor], return_attention: bool = False,
                runs: torch.Tensor | None = None):
        """Logits (K, B, n_words) over the answer vocabulary; padded and nil rows get -inf.

        `sentences`: each run's table of distinct sentences, {"bags": sentence_bags(...)}; the batch holds
        story_ids (K, B, M) and query_ids (K, B) into it, and n_facts (K, B). `runs` (K,) selects the runs of
        the model the batch, weights and sentences belong to (default: all of them, in order).

        Only the first max(n_facts) slots are computed: the slots past every story's facts are empty (zero
        m_i and c_i, score 0), so they enter the softmax as one extra logit log(#empty) and leave o unchanged
        (exactly the full-memory result; with `mask_empty_memory` they are simply dropped)."""
        cfg = self.cfg
        story_ids, n_facts = batch["story_ids"], batch["n_facts"]      # (K, B, M), (K, B)
        K, B, M = story_ids.shape
        M_used = max(int(n_facts.max()), 1)
        story_ids = story_ids[..., :M_used]
        slot = torch.arange(M_used, device=story_ids.device)
        filled = slot < n_facts.unsqueeze(-1)                           # (K, B, M_used)
        n_empty = M - M_used                                            # slots empty in every story

        if cfg.tying == "layerwise":                                   # u^1 = B q; every hop reads A and C
            query, hops = "B", [("A", "C")] * cfg.hops
        else:                                                           # B = E_0; hop k: A^k = E_k, C^k = E_{k+1}
            query, hops = "E0", [(f"E{k}", f"E{k + 1}") for k in range(cfg.hops)]
        d = cfg.embedding_dim
        # m_i = sum_j l_j A x_ij + T_A(i), c_i likewise with C. The matrices the hops read sit side by side,
        # (K, V, n d): one sparse product embeds every sentence under all of them (where a batch reads few of the
        # table's sentences, as a joint model's does, only those: _batch_rows) and one gather reads the
        # slots (K, B, M_used, n d), then each matrix takes its d columns (the same numbers as one product and
        # one gather per matrix, in fewer and larger calls). The time rows T_A(i) enter through u^T T_A and
        # sum_i p_i T_C(i) (_time_scores, _time_output), never as (K, B, M_used, d) copies. Time row 1 is the
        # most recent sentence (thesis ch. 3).
        read = list(dict.fromkeys(n for pair in hops for n in pair))
        X = torch.cat([weights[n] for n in read], -1)                   # (K, V, n d)
        per_run = sentences["bags"]["rows_per_run"] if "bags" in sentences else None
        batch_rows = self._batch_rows(sentences, story_ids, batch["query_ids"], query in read)
        if batch_rows is not None:                                      # only the rows this batch reads
            rows, slot_at, query_at = batch_rows
            table, _ = self._embed(X, sentences, rows)                  # (the batch's distinct rows, n d)
            slot_rows = table.index_select(0, slot_at).view(K, B, M_used, -1)
            query_rows = None if query_at is None else table.index_select(0, query_at).view(K, B, -1)
        else:
            table, starts = self._embed(X, sentences)                   # (rows, n d)
            slot_rows = self._rows(table, starts, story_ids) if per_run is None else None
            query_rows = self._rows(table, starts, batch["query_ids"]) if query in read else None
        if slot_rows is not None:                                       # the slots' rows, gathered
            memory = dict(zip(read, slot_rows.split(d, -1)))
        else:                                                           # each run's whole table, (K, U, d) per matrix
            memory = dict(zip(read, table.view(K, per_run, len(read), d).unbind(2)))
        if query in read:                                               # adjacent: B = E_0 = A^1
            u = query_rows.split(d, -1)[read.index(query)]
        else:                                                           # layer-wise: B embeds only queries
            u = self._rows(*self._embed(weights[query], sentences), batch["query_ids"])
        time_rows = {n: weights[n][:, cfg.n_words:cfg.n_words + M_used] for n in read}      # T_E(1..M_used)
        rev = (n_facts.unsqueeze(-1) - 1 - slot).clamp_min(0)          # slot i holds time row n_facts - 1 - i
        # How the slots past the computed ones (see the docstring) enter eq. 33 (memory_hops' `empty_slots`):
        nil, count = None, u.new_full((), max(n_empty, 1))
        if cfg.memory_slots == "longest_story":
            # each story has min(M, its task's longest story) slots: n_facts filled, the rest empty (logit 0, c 0)
            slots = self.slots if runs is None else self.slots[runs]
            empty = (slots.view(-1, 1) - n_facts).clamp_min(0).unsqueeze(-1).to(u.dtype)   # (K, B, 1)
            empty_slots, extra = "longest_story", torch.log(empty)      # -inf where a story fills its memory
        elif cfg.nil_row == "learned" and n_empty:                      # learned nil: the empty slots hold m_0, c_0
            nil = dict(zip(read, table[starts].split(d, -1)))           # the nil sentence (table row 0), no time row
            empty_slots, extra = "learned_nil", u.new_full((), math.log(n_empty))
        elif cfg.mask_empty_memory:
            empty_slots, extra = "masked", None
        elif n_empty:
            empty_slots, extra = "count", u.new_full((K, B, 1), math.log(n_empty))
        else:
            empty_slots, extra = "none", None
        hops_run = run_as(memory_hops, self.hop_kernels_used)          # eqs. 33-35, op by op or compiled
        u, weights_per_hop = hops_run(u, memory, time_rows, story_ids, rev, filled, extra, count, nil,
                                      hops=tuple(hops), whole_tables=slot_rows is None,
                                      temporal=cfg.temporal_encoding, empty_slots=empty_slots,
                                      attention=return_attention)
        attention = []
        for p, p_empty in weights_per_hop:                              # each hop's varpi over all M slots
            if p_empty is None:                                         # none on the empty slots (longest_story:
                p_empty = p.new_zeros(*p.shape[:2], 1)                  # their mass left out; masked: dropped)
            attention.append(torch.cat([p, p_empty.expand(*p.shape[:2], n_empty)], -1) if n_empty else p)
        word_rows = self.word_rows if runs is None else self.word_rows[runs]
        if cfg.tying == "layerwise":
            W = self.W if runs is None else self.W[runs]
            logits = torch.einsum("kbd,kvd->kbv", u, W)                 # eq. 36: W (o^K + u^K)
        else:
            logits = torch.einsum("kbd,kvd->kbv", u, weights[f"E{cfg.hops}"][:, : cfg.n_words])  # W^T = C^K
        logits = logits.masked_fill(~word_rows[:, None, : cfg.n_words], float("-inf"))
        return (logits, torch.stack(attention, dim=2)) if return_attention else logits
