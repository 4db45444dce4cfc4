"""The compression methods and the DP mechanism's parts (raycompo/compression/), each
against its paper's definition (issue 34's Definitions), computed here independently."""

from __future__ import annotations

import math

import pytest
import torch

from raycompo import keyed
from raycompo.compression import Method, compress, parse_method, update
from raycompo.compression.keys import WEIGHT
from raycompo.compression.privacy import Accountant, DpSettings, check_dp, noised
from raycompo.compression.uplink import Uplink, key_tag
from raycompo.errors import ConfigError
from raycompo.keyed import keyed_hash_reference, keyed_uniform
from raycompo.seeding import COMPRESS, derive_seed, generator


def gens(n: int, tag: int = 0) -> list[torch.Generator]:
    return [generator(0, 99, tag, i) for i in range(n)]


def seeds(n: int, tag: int = 0) -> torch.Tensor:
    """The keyed draws' (n,) seeds: those of `gens(n, tag)`'s generators."""
    return torch.tensor([derive_seed(0, 99, tag, i) for i in range(n)], dtype=torch.int64)


DRAWS = {"generators": gens, "keyed": seeds}


@pytest.mark.parametrize("draws", sorted(DRAWS))
def test_qsgd_is_unbiased_over_many_keyed_draws(draws):
    x = torch.randn(1, 40, generator=generator(1), dtype=torch.float64)
    n, s = 20000, 2
    q = compress(x.expand(n, -1).clone(), Method("qsgd", s), DRAWS[draws](n))
    # every draw is ||x|| sign(x_i) l / s with l the floor of s|x_i|/||x|| or the next level
    norm = x.norm()
    low = (s * x.abs() / norm).floor()
    levels = q.abs() * s / norm
    assert torch.all(((levels - low).abs() < 1e-9) | ((levels - low - 1).abs() < 1e-9))
    assert torch.all((q == 0) | (q.sign() == x.sign()))
    # E Q(x) = x: each entry's std is at most ||x|| / s, so the mean is within 5 of those / sqrt(n)
    tol = 5 * float(norm) / s / math.sqrt(n)
    assert torch.all((q.mean(0) - x[0]).abs() < tol)
    assert not torch.equal(q[0], q[1])  # the draws differ by key


def test_keyed_uniforms_are_the_hashes_top_53_bits_and_uniform():
    """keyed_uniform's (r, i) is (h(seed_r, i) >> 11) 2^-53, h computed in pure Python; its
    values look uniform on [0, 1) (mean, variance and deciles of 10^6 draws)."""
    s = seeds(3)
    u = keyed_uniform(s, 5)
    for r in range(3):
        for i in range(5):
            assert float(u[r, i]) == (keyed_hash_reference(int(s[r]), i) >> 11) * 2.0**-53
    with pytest.MonkeyPatch.context() as patch:  # hashed in pieces of rows, and of 2 rows
        for cache in (3, 10):
            patch.setattr(keyed, "CACHE_ELEMENTS", cache)
            torch.testing.assert_close(keyed_uniform(s, 5), u, rtol=0, atol=0)
    big = keyed_uniform(seeds(100), 10_000).flatten()
    assert float(big.min()) >= 0.0 and float(big.max()) < 1.0
    assert abs(float(big.mean()) - 0.5) < 5 * math.sqrt(1 / 12 / len(big))
    assert abs(float(big.var()) - 1 / 12) < 0.002
    counts = torch.histc(big, bins=10, min=0.0, max=1.0)
    assert float((counts / len(big) - 0.1).abs().max()) < 0.003


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_uniforms_and_compression_equal_the_cpus():
    """The keyed draws' bits on CUDA (torch's int64, in blocks of rows) are the CPU's (numpy's
    uint64, in cache-sized blocks), and so are rand-k's rows and QSGD's (to its norm's rounding)."""
    s = seeds(300, tag=2)
    assert torch.equal(keyed_uniform(s.cuda(), 5000, block_elements=70_000).cpu(), keyed_uniform(s, 5000))
    x = torch.randn(300, 5000, generator=generator(4), dtype=torch.float64)
    assert torch.equal(compress(x.cuda(), Method("randk", 50), s.cuda()).cpu(), compress(x, Method("randk", 50), s))
    # QSGD: the same levels but where a norm's last bit differs on the device (its reduction order)
    torch.testing.assert_close(compress(x.cuda(), Method("qsgd", 4), s.cuda()).cpu(), compress(x, Method("qsgd", 4), s),
                               rtol=1e-12, atol=1e-12)


def test_keyed_randk_picks_each_entry_with_probability_k_over_d():
    """rand-k's keyed entries: k distinct entries of range(d) per row, each entry kept in
    about k/d of 20,000 rows (binomial: within 5 standard deviations)."""
    x = torch.ones(20_000, 30)
    r = compress(x, Method("randk", 6), seeds(20_000, tag=1))
    assert (r != 0).sum(1).eq(6).all()
    p, n = 6 / 30, len(x)
    assert float(((r != 0).sum(0) / n - p).abs().max()) < 5 * math.sqrt(p * (1 - p) / n)


def test_a_members_keyed_draws_do_not_depend_on_its_chunk():
    """The uplink's keyed draws: a member's compressed rows are the same alone (the per-client
    path) and in a chunk of others, at any place; its seed is (seed, COMPRESS, client, round,
    exchange, key)'s generator seed; `keyed=False` draws from that generator (releases up to
    0.1.1)."""
    members = [(3, 0), (7, 0), (3, 1), (11, 2)]
    x = torch.randn(4, 50, generator=generator(9), dtype=torch.float64)
    for method in ("qsgd:4", "randk:5"):
        uplink = Uplink({"g": parse_method(method, "g")}, None, {"p": {}}, seed=5)
        chunk, _, _ = uplink.apply("p", 2, members, {"g": x}, {}, [{}] * 4, batched=True)
        back, _, _ = uplink.apply("p", 2, members[::-1], {"g": x.flip(0)}, {}, [{}] * 4, batched=True)
        torch.testing.assert_close(back["g"].flip(0), chunk["g"], rtol=0, atol=0)
        for i, member in enumerate(members):
            alone, _, _ = uplink.apply("p", 2, [member], {"g": x[i]}, {}, [{}], batched=False)
            torch.testing.assert_close(alone["g"], chunk["g"][i], rtol=0, atol=0)
        old = Uplink({"g": parse_method(method, "g")}, None, {"p": {}}, seed=5, keyed=False)
        before, _, _ = old.apply("p", 2, members, {"g": x}, {}, [{}] * 4, batched=True)
        tag = key_tag("p", "g")
        by_generators = compress(x, parse_method(method), [generator(5, COMPRESS, c, 2, e, tag) for c, e in members])
        by_seeds = compress(x, parse_method(method), torch.tensor(
            [derive_seed(5, COMPRESS, c, 2, e, tag) for c, e in members], dtype=torch.int64))
        torch.testing.assert_close(before["g"], by_generators, rtol=0, atol=0)
        torch.testing.assert_close(chunk["g"], by_seeds, rtol=0, atol=0)
        assert not torch.equal(chunk["g"], before["g"])


@pytest.mark.parametrize("draws", sorted(DRAWS))
def test_topk_keeps_exactly_k_largest_and_randk_k_entries(draws):
    x = torch.randn(3, 50, generator=generator(2))
    for param, k in ((7.0, 7), (0.1, 5), (0.001, 1)):  # a count, a fraction, at least one entry
        out = compress(x, Method("topk", param))
        assert (out != 0).sum(1).tolist() == [k] * 3
        for row, full in zip(out, x):
            kept = row.nonzero().flatten()
            assert set(kept.tolist()) == set(full.abs().topk(k).indices.tolist())
            assert torch.equal(row[kept], full[kept])  # values as they are
        r = compress(x, Method("randk", param), DRAWS[draws](3))
        assert (r != 0).sum(1).tolist() == [k] * 3 and torch.equal(r[r != 0], x[r != 0])  # unscaled


def test_scaled_sign():
    x = torch.tensor([[1.0, -3.0, 0.5, -0.5]])
    assert torch.allclose(compress(x, Method("sign")), torch.tensor([[1.25, -1.25, 1.25, -1.25]]))


def test_message_sizes_follow_the_definitions():
    d = 1000
    assert Method("qsgd", 4).bits(d) == 32 + d * (1 + 3)  # norm, sign bit, level 0..4 in 3 bits
    assert Method("qsgd", 1).bits(d) == 32 + d * 2
    assert Method("topk", 10).bits(d) == 10 * (32 + 10)  # ceil(log2 1000) = 10
    assert Method("randk", 0.05).bits(d) == 50 * (32 + 10)
    assert Method("sign").bits(d) == d + 32


def test_error_feedback_residual_carries_what_was_not_sent():
    uplink = Uplink({"g": Method("topk", 2)}, None, {}, seed=0)
    e: dict = {}
    for t in range(3):
        x = torch.randn(1, 6, generator=generator(3, t))
        out, (res,), encoded = uplink.apply("p", t, [(0, 0)], {"g": x[0]}, {}, [e], batched=False)
        previous = e.get("p:g", torch.zeros(6))
        torch.testing.assert_close(out["g"] + res["p:g"], x[0] + previous)  # sent + kept == input + previous
        assert int((out["g"] != 0).sum()) == 2 and encoded == {"g": [math.ceil(2 * (32 + 3) / 8)]}
        e = res


def test_an_update_is_compressed_as_its_difference_and_clipped_with_weights_set_to_one():
    w = torch.tensor([1.0, 1.0, 1.0])
    local = torch.tensor([4.0, 5.0, 1.0])  # delta (3, 4, 0), norm 5
    declared = {"local": {"nw": update("w", weight="n"), "n": WEIGHT}}
    out, _, _ = Uplink({}, 1.0, declared, seed=0).apply(
        "local", 0, [(0, 0)], {"nw": 2.0 * local, "n": 2.0}, {"w": w}, [{}], batched=False)
    # delta clipped to norm 1: (0.6, 0.8, 0); the weight n is 1 (fixed denominator)
    torch.testing.assert_close(out["nw"], w + torch.tensor([0.6, 0.8, 0.0]))
    assert out["n"] == 1.0


def test_noise_has_the_stated_variance():
    sigma = 0.7
    sums = {"g": torch.zeros(200_000, dtype=torch.float64), "n": 3.0}
    out = noised(sums, sigma, {"g": generator(5), "n": generator(6)}, skip={"n"})
    assert out["n"] == 3.0  # a weight is not noised
    assert abs(float(out["g"].var()) / sigma**2 - 1) < 0.02 and abs(float(out["g"].mean())) < 0.01


def test_accountant_matches_dp_accountings_documented_gaussian_value():
    # dp-accounting's own test (rdp_privacy_accountant_test, test_compute_epsilon_delta_gaussian):
    # the Gaussian mechanism with noise multiplier 4.530877117 is exactly (1, 1e-6)-DP.
    # Here all n clients each round (q = 1) and sensitivity 2C (replace-one): z = 2 * 4.530877117.
    acc = Accountant(10, DpSettings(clip=1.0, noise=2 * 4.530877117, delta=1e-6))
    acc.exchange(1, 10)
    acc.close_round(1)
    assert acc.epsilon() == pytest.approx(1.0, abs=1e-4)


def stated_mechanism_epsilon(n: int, m: int, clip: float, z: float, delta: float, exchanges: list[int]) -> float:
    """epsilon at delta of the mechanism docs/compression.md states, computed by dp-accounting
    from first principles: each round samples m of n clients uniformly WITHOUT replacement
    (fixed size; the replace-one relation, n public) and releases E noised sums of the
    cohort's clipped contributions. Replacing one client's data moves a sum by at most 2C
    (its old contribution out, the new one in), the noise's standard deviation is z C, so one
    release is a Gaussian mechanism of multiplier z C / (2 C). E releases on the same sample
    are one Gaussian mechanism on their concatenation: L2 sensitivity 2C sqrt(E), the same
    noise, multiplier z C / (2 C sqrt(E)). With m = n: no sampling."""
    from collections import Counter

    from dp_accounting import dp_event, rdp

    lib = rdp.RdpAccountant(neighboring_relation=rdp.rdp_privacy_accountant.NeighborRel.REPLACE_ONE)
    sigma, sensitivity = z * clip, 2 * clip
    for e, rounds in sorted(Counter(exchanges).items()):
        gaussian = dp_event.GaussianDpEvent(sigma / (sensitivity * math.sqrt(e)))
        lib.compose(gaussian if m == n else dp_event.SampledWithoutReplacementDpEvent(n, m, gaussian), rounds)
    return lib.get_epsilon(delta)


@pytest.mark.parametrize("n,m,exchanges", [
    (100, 10, [1] * 20),  # one noised exchange a round (FedAvg)
    (100, 10, [2, 1, 3, 2, 2, 1]),  # several on one cohort (ComFedL's values then models, FedDRO's I + 1)
    (12, 12, [2, 2, 1]),  # every client each round: the Gaussians alone
])
def test_accountant_is_the_stated_mechanism_computed_by_the_library(n, m, exchanges):
    clip, z, delta = 0.5, 1.1, 1e-5
    acc = Accountant(n, DpSettings(clip, z, delta))
    for r, e in enumerate(exchanges, 1):
        for _ in range(e):
            acc.exchange(r, m)
        acc.close_round(r)
    assert acc.epsilon() == pytest.approx(stated_mechanism_epsilon(n, m, clip, z, delta, exchanges), rel=1e-9)
    assert acc.epsilon() > stated_mechanism_epsilon(n, m, clip, z, delta, [1] * len(exchanges)) or set(exchanges) == {1}
    again = Accountant(n, DpSettings(clip, z, delta))
    again.load(acc.state(), len(exchanges))  # a checkpoint's state rebuilds it
    assert again.epsilon() == acc.epsilon()


@pytest.mark.parametrize("text,match", [
    ("topk:0", "K must be > 0"), ("randk:-1", "K must be > 0"), ("qsgd:0", "S must be an integer >= 1"),
    ("qsgd:1.5", "S must be an integer"), ("zip", "unknown method"), ("topk", "needs a parameter"),
    ("topk:2.5", "must be an integer"),
])
def test_bad_methods_are_one_line_errors(text, match):
    with pytest.raises(ConfigError, match=match):
        parse_method(text, "nw")


def test_bad_dp_settings():
    with pytest.raises(ConfigError, match="--dp-clip C must be > 0"):
        check_dp(0.0, 1.0, 1e-5)
    with pytest.raises(ConfigError, match="--dp-noise z must be >= 0"):
        check_dp(1.0, -0.1, 1e-5)
    for delta in (0.0, 1.0, 2.0):
        with pytest.raises(ConfigError, match=r"--dp-delta must be in \(0, 1\)"):
            check_dp(1.0, 1.0, delta)
    with pytest.raises(ConfigError, match="needs --dp-clip"):
        check_dp(None, 1.0, 1e-5)
    with pytest.raises(ConfigError, match="above the key's size"):
        Method("topk", 20).check_size(10, "g")
