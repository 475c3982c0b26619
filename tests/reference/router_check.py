"""celer's mixture-of-experts router choices against a fixture's (tests/data/mlx/<model>.json: its
"moe" block and each prompt's "router" and "router_margin", written by make_mlx_fixtures.py), for
test_moe_router.py and test_mlx_parity.py. Needs no mlx.

celer's side is `logits_dump --router`: one JSON line {"pos": i, "layer": l, "experts": [...]} per
token and MoE layer (tests/tools/logits_dump.c).

A choice (position i, MoE layer l) is decided when the reference's router margin there, its k-th
largest router logit minus its (k+1)-th (log p_k / p_k+1), is at least the fixture's
moe.threshold. Where the margin is smaller, celer may legitimately keep the other expert: a
divergence. It is not a small difference: the token then gets another expert's output, so at that
position every later MoE layer's choice and the logits may differ too, and so may later positions,
which attend to this one (in mlx-lm itself, swapping the k-th and (k+1)-th expert at one near-tie
flipped the decided top-1 token of that position in a quarter to a half of the cases, and one at a
later position about once every 1-4 swaps; docs/correctness.md). So every choice (j, l') with
j >= i and l' after l is downstream of a divergence at (i, l) and is only counted, and the logits
of positions >= i are not compared (first_divergence).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RouterCheck:
    choices: int = 0  # (position, MoE layer) pairs looked at
    compared: int = 0  # decided and not downstream of a divergence: must be equal
    mismatches: list[str] = field(default_factory=list)  # compared, and celer chose other experts
    divergences: list[str] = field(default_factory=list)  # undecided, not downstream, and celer differs
    undecided_equal: int = 0  # undecided, not downstream, and equal
    downstream: int = 0  # after a divergence: not compared
    downstream_differ: int = 0  # of those, how many differ
    first_divergence: int | None = None  # position of the first divergence; logits from here on are not compared

    def add(self, other: RouterCheck) -> None:
        for k in ("choices", "compared", "undecided_equal", "downstream", "downstream_differ"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.mismatches += other.mismatches
        self.divergences += other.divergences


def celer_router(rows: list[dict]) -> dict[tuple[int, int], list[int]]:
    """{(position, layer): experts} from logits_dump's output lines (the --router ones)."""
    return {(r["pos"], r["layer"]): r["experts"] for r in rows if "experts" in r}


def check(fx: dict, p: dict, got: dict[tuple[int, int], list[int]], n_pos: int | None = None,
          label: str = "") -> RouterCheck:
    """celer's choices (got, from celer_router) against prompt p of fixture fx, over positions
    [0, n_pos) (default: all of prompt + continuation)."""
    moe = fx["moe"]
    layers, k, threshold = moe["layers"], moe["top_k"], moe["threshold"]
    n = len(p["ids"]) + len(p["gen"]) if n_pos is None else n_pos
    r = RouterCheck()

    def differs(i: int, j: int) -> bool:
        g = got.get((i, layers[j]))
        return g is None or sorted(g) != p["router"][j][i]

    # divergences first (undecided choices celer made differently), then what lies downstream of them
    sources = [(i, j) for j in range(len(layers)) for i in range(n)
               if p["router_margin"][j][i] < threshold and differs(i, j)]
    for i in range(n):
        for j, layer in enumerate(layers):
            r.choices += 1
            want, margin, g = p["router"][j][i], p["router_margin"][j][i], got.get((i, layer))
            d = differs(i, j)
            if any(si <= i and sj < j for si, sj in sources):
                r.downstream += 1
                r.downstream_differ += d
                continue
            if margin < threshold:
                if d:
                    r.divergences.append(f"{label}pos {i} layer {layer}: celer {g}, reference {want} "
                                         f"(margin {margin:.4f})")
                else:
                    r.undecided_equal += 1
                continue
            r.compared += 1
            if d:
                r.mismatches.append(f"{label}pos {i} layer {layer}: celer {g if g is not None else 'nothing'}, "
                                    f"reference {want} (margin {margin:.4f} >= {threshold}; {k} experts)")
    r.first_divergence = min((i for i, _ in sources), default=None)
    return r


def summary(r: RouterCheck, threshold: float) -> str:
    return (f"router: {r.choices} choices, {r.compared} compared (decided, margin >= {threshold}), "
            f"{len(r.mismatches)} mismatches, {len(r.divergences)} divergences at undecided choices "
            f"({r.undecided_equal} undecided equal), {r.downstream} downstream of a divergence "
            f"({r.downstream_differ} of them differ)")
