"""The synthetic user-item data of ``systems/e2egrec.md`` §4.1 (Strata's own design).

Users and items live in a 16-d latent space around 32 community centres; items
also get a popularity bias and one of two domains (``feed``/``search``); users get
a domain mix. User ``u`` draws ``k_u`` distinct items (heavy-tailed, mean about 15,
capped at 200) with probability proportional to
``exp(<u, i> / tau) * pop_i ** 0.5 * mix_u[domain_i]``, by Gumbel top-k over the
whole catalogue in chunks of users. Each interaction gets a uniform timestamp and a
``long_view`` label drawn from ``sigmoid(2 <u, i> + b_domain + noise)``.

The side features are deliberately weak: a fixed random projection of the latent
plus Gaussian noise at a signal-to-noise ratio of 0.5 (per-dimension variance of
signal / noise), so the collaborative (multi-hop) signal matters.

Examples:
    >>> inter = synth_interactions(SynthConfig.smoke(), seed=0)
    >>> inter.num_users, inter.num_items, inter.domains
    (2000, 1000, ('feed', 'search'))
    >>> 20_000 < inter.num_interactions < 40_000
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from strata.operators.errors import check
from strata.operators.recsys.interactions import Interactions
from strata.storage._types import Float32Array, Int64Array

__all__ = ["SynthConfig", "synth_interactions"]


@dataclass(frozen=True, slots=True)
class SynthConfig:
    """Generator settings; the defaults are the full configuration of §4.1.

    Attributes:
        num_users: users (20,000; smoke 2,000).
        num_items: items (10,000; smoke 1,000).
        communities: latent communities (32).
        dim: latent dimension (16).
        domains: item domains (surfaces).
        mean_per_user: mean interactions per user (about 15).
        max_per_user: cap on a user's interactions (200; at most the catalogue).
        count_sigma: log-normal spread of the per-user count (heavy tail).
        user_noise: spread of users around their centre (relative to the centre).
        item_noise: spread of items around their centre.
        tau: softmax temperature of the affinity ``<u, i>``.
        pop_sigma: log-normal spread of item popularity.
        pop_exponent: popularity exponent in the draw weight (0.5).
        feature_snr: per-dimension signal-to-noise variance ratio of features.
        domain_bias: ``b_domain`` of the long-view logit, one per domain.
        label_noise: standard deviation of the long-view logit noise.
        span: timestamps are uniform in ``[0, span)`` (seconds).
        chunk: users per Gumbel top-k chunk (bounds memory to chunk x items).
    """

    num_users: int = 20_000
    num_items: int = 10_000
    communities: int = 32
    dim: int = 16
    domains: tuple[str, ...] = ("feed", "search")
    mean_per_user: float = 15.0
    max_per_user: int = 200
    count_sigma: float = 0.8
    user_noise: float = 0.5
    item_noise: float = 0.5
    tau: float = 0.25
    pop_sigma: float = 1.0
    pop_exponent: float = 0.5
    feature_snr: float = 0.5
    domain_bias: tuple[float, ...] = (-0.5, 0.5)
    label_noise: float = 1.0
    span: int = 90 * 24 * 3600
    chunk: int = 1024

    @classmethod
    def smoke(cls) -> SynthConfig:
        """The smoke configuration: 2,000 users and 1,000 items."""
        return cls(num_users=2_000, num_items=1_000)

    def __post_init__(self) -> None:
        where = "SynthConfig"
        check(self.num_users > 0, "num_users", where, "> 0", self.num_users)
        check(self.num_items > 1, "num_items", where, "> 1", self.num_items)
        check(self.communities > 0, "communities", where, "> 0", self.communities)
        check(len(self.domains) > 0, "domains", where, "at least one", self.domains)
        check(
            len(self.domain_bias) == len(self.domains),
            "domain_bias",
            where,
            f"one bias per domain ({len(self.domains)})",
            self.domain_bias,
        )
        check(self.max_per_user >= 1, "max_per_user", where, ">= 1", self.max_per_user)
        check(self.tau > 0, "tau", where, "> 0", self.tau)
        check(self.feature_snr > 0, "feature_snr", where, "> 0", self.feature_snr)


def _weak_features(
    latent: np.ndarray, projection: np.ndarray, snr: float, rng: np.random.Generator
) -> Float32Array:
    """``latent @ projection`` plus noise at per-dimension variance ratio ``snr``."""
    signal = latent @ projection
    noise_std = np.sqrt(signal.var(axis=0).mean() / snr)
    noisy = signal + rng.normal(0.0, noise_std, size=signal.shape)
    out: Float32Array = noisy.astype(np.float32)
    return out


def synth_interactions(cfg: SynthConfig, seed: int) -> Interactions:
    """Generate the synthetic interactions of §4.1.

    Args:
        cfg: the generator settings.
        seed: the data seed; the same ``(cfg, seed)`` gives identical output.

    Returns:
        Interactions with raw weak side features (``user_features``,
        ``item_features``), item domains and ``long_view`` labels; original ids are
        the dense ids themselves.
    """
    rng = np.random.default_rng(seed)
    d, n_u, n_i = cfg.dim, cfg.num_users, cfg.num_items
    centres = rng.normal(0.0, 1.0 / np.sqrt(d), size=(cfg.communities, d))
    user_comm = rng.integers(0, cfg.communities, size=n_u)
    item_comm = rng.integers(0, cfg.communities, size=n_i)
    users = centres[user_comm] + rng.normal(0, cfg.user_noise / np.sqrt(d), (n_u, d))
    items = centres[item_comm] + rng.normal(0, cfg.item_noise / np.sqrt(d), (n_i, d))
    log_pop = rng.normal(0.0, cfg.pop_sigma, size=n_i)
    n_dom = len(cfg.domains)
    item_domain = rng.integers(0, n_dom, size=n_i).astype(np.int64)
    user_mix = rng.dirichlet(np.full(n_dom, 2.0), size=n_u)
    # Heavy-tailed counts with mean about mean_per_user (log-normal, capped).
    mu = np.log(cfg.mean_per_user) - cfg.count_sigma**2 / 2
    counts = np.clip(
        np.rint(rng.lognormal(mu, cfg.count_sigma, size=n_u)),
        1,
        min(cfg.max_per_user, n_i),
    ).astype(np.int64)
    item_bias = cfg.pop_exponent * log_pop  # log of pop_i ** 0.5
    log_mix = np.log(user_mix)

    chosen_users: list[np.ndarray] = []
    chosen_items: list[np.ndarray] = []
    for start in range(0, n_u, cfg.chunk):
        stop = min(start + cfg.chunk, n_u)
        logits = users[start:stop] @ items.T / cfg.tau + item_bias[None, :]
        logits += log_mix[start:stop][:, item_domain]
        logits += rng.gumbel(size=logits.shape)
        k = counts[start:stop]
        k_max = int(k.max())
        # Gumbel top-k: the k largest perturbed logits are a draw without
        # replacement from softmax(logits) (Kool et al., ICML 2019).
        top = np.argpartition(-logits, k_max - 1, axis=1)[:, :k_max]
        order = np.argsort(-np.take_along_axis(logits, top, axis=1), axis=1)
        top = np.take_along_axis(top, order, axis=1)
        keep = np.arange(k_max)[None, :] < k[:, None]
        rows = np.broadcast_to(np.arange(start, stop)[:, None], top.shape)
        chosen_users.append(rows[keep])
        chosen_items.append(top[keep])
    user = np.concatenate(chosen_users).astype(np.int64)
    item = np.concatenate(chosen_items).astype(np.int64)
    timestamp: Int64Array = np.asarray(
        rng.integers(0, cfg.span, size=user.shape[0]), dtype=np.int64
    )
    affinity = np.einsum("ij,ij->i", users[user], items[item])
    bias = np.asarray(cfg.domain_bias)[item_domain[item]]
    noise = rng.normal(0.0, cfg.label_noise, size=user.shape[0])
    p_long = 1.0 / (1.0 + np.exp(-(2.0 * affinity + bias + noise)))
    label = (rng.random(user.shape[0]) < p_long).astype(np.float32)
    projection = np.linalg.qr(rng.normal(size=(d, d)))[0]
    return Interactions(
        user=user,
        item=item,
        timestamp=timestamp,
        label=label,
        num_users=n_u,
        num_items=n_i,
        item_domain=item_domain,
        domains=cfg.domains,
        user_ids=pa.array(np.arange(n_u, dtype=np.int64)),
        item_ids=pa.array(np.arange(n_i, dtype=np.int64)),
        user_features=_weak_features(users, projection, cfg.feature_snr, rng),
        item_features=_weak_features(items, projection, cfg.feature_snr, rng),
    )
