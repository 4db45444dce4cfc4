"""The papers' claims, one `Claim` each. Settings are those of the README's "Reproductions"
(the papers' settings, which the tasks' defaults already hold); a variant is one line.

To add a variant: one more `V(...)` line in a claim's `variants`. To try a new engine option
on a whole claim: add it to the claim's `settings` (or per variant as a keyword), or pass
`--set KEY=VALUE` on the command line.
"""

from __future__ import annotations

from dataclasses import replace

from raycompo.reproduce.spec import Alt, Better, Bound, Claim, Close, Full, Panel, V

ACC_PANELS = (
    Panel("train_acc", "average train accuracy"),
    Panel("val_acc", "average validation accuracy"),
    Panel("train_acc_worst", "worst-client train accuracy"),
    Panel("val_acc_worst", "worst-client validation accuracy"),
)
LOSS_PANELS = (Panel("train_loss", "train loss"), Panel("val_loss", "validation loss"))
DRO_TINY = {"val_per_client": 20, "batch_size": 8}
SINE_TINY = {"val_tasks": 10, "eval_query": 10, "p": 1, "batch_size": 1}
DAMAML_TINY = {"train_per_client": 20, "val_per_client": 10, "hidden": 4, "tau": 1, "batch_size": 4}
DIGITS_TINY = {"n_clients": 4, "batch_size": 4}
FAIR_TINY = {"n_clients": 4, "synth_train": 200, "synth_test": 80, "batch_size": 4, "full_every": 2}
BASELINES = ("fedavg", "qfedavg", "drfl")
LSE = "with normalizer=lse (eq. (5), our stable option; the paper's settings otherwise)"

CLAIMS: dict[str, Claim] = {}

MEASURED_WITH_RANDPERM: frozenset[str] = frozenset()
"""Claims whose committed report (reproductions/<name>/, or its docs/reproductions.md section)
was measured before 'keyed' became the default sampler and not re-run since (the others were
re-run on 28 November 2026: docs/reproductions.md, "Re-run with the keyed sampler"). They run with
'randperm' (`Claim.sampler`), so that their commands repeat their reports' rows, until a
report is re-run with the default and its name leaves this set (the reports made with `--set`,
comfedl-fig3-lse and damaml-fig5-lse, run their claim's runs: pinned with it)."""


def register(claim: Claim) -> Claim:
    if claim.name in MEASURED_WITH_RANDPERM:
        claim = replace(claim, sampler="randperm")
    CLAIMS[claim.name] = claim
    return claim


# --- ComFedL (journal) section 5.1: robust FL on imbalanced MNIST ---------------------------

register(Claim(
    name="comfedl-fig2",
    source="ComFedL journal, section 5.1, Figure 2 (arXiv version: Figure 3)",
    title="Robust FL on imbalanced MNIST: ComFedL vs FedAvg, q-FedAvg, DRFL",
    task="dro-mnist5k", rounds=200,
    full=Full(task="dro-mnist"),
    variants=(
        V("comfedl", "comfedl"),  # the paper's gamma 0.2
        V("fedavg", "fedavg"),
        V("qfedavg", "qfedavg"),  # q 0.2
        V("drfl", "drfl"),  # weight lr 0.08
        V("comfedl-g0.5", "comfedl", gamma=0.5),
        V("comfedl-g1", "comfedl", gamma=1),
        V("comfedl-g5", "comfedl", gamma=5),
        V("comfedl-lse", "comfedl", normalizer="lse"),  # gamma 0.2, eq. (5) form
    ),
    alts=(Alt(LSE, {"comfedl": "comfedl-lse"}),),
    metrics=("val_acc", "val_acc_worst", "train_acc", "train_acc_worst"),
    panels=ACC_PANELS,
    paper_says="ComFedL (gamma 0.2) beats FedAvg, q-FedAvg and DRFL in average and worst-client accuracy",
    checks=(Better("val_acc_worst", "comfedl", BASELINES), Better("val_acc", "comfedl", BASELINES)),
    tiny=DRO_TINY,
    notes="Offline: the big client holds 3,000 images (paper 5,000). train_acc columns appear once the engine writes them.",
))

register(Claim(
    name="comfedl-fig3",
    source="ComFedL journal, section 5.1, Figure 3 (arXiv version: Figure 2)",
    title="ComFedL: synchronization gap tau (top row) and regularization gamma (bottom row)",
    task="dro-mnist5k", rounds=200,
    full=Full(task="dro-mnist"),
    variants=(
        V("tau1", "comfedl", group="tau", tau=1),
        V("tau5", "comfedl", group="tau", tau=5),
        V("tau10", "comfedl", group="tau", tau=10),
        V("gamma0.1", "comfedl", group="gamma", gamma=0.1),
        V("gamma0.2", "comfedl", group="gamma", gamma=0.2),
        V("gamma2", "comfedl", group="gamma", gamma=2),
        V("gamma5", "comfedl", group="gamma", gamma=5),
    ),
    metrics=("val_acc", "mean:val_acc", "train_acc", "mean:train_acc"),
    panels=(
        Panel("train_acc", "tau: train accuracy", group="tau"),
        Panel("val_acc", "tau: validation accuracy", group="tau"),
        Panel("train_acc", "gamma: train accuracy", group="gamma"),
        Panel("val_acc", "gamma: validation accuracy", group="gamma"),
    ),
    paper_says="larger tau converges faster; gamma 0.1/0.2 converge faster than 2/5 (mean validation accuracy over the run)",
    checks=(
        Better("mean:val_acc", "tau10", ("tau1",)),
        Better("mean:val_acc", "gamma0.1", ("gamma2", "gamma5")),
        Better("mean:val_acc", "gamma0.2", ("gamma2", "gamma5")),
    ),
    tiny=DRO_TINY,
    notes="The paper does not print the tau values; we use 1, 5, 10. Gamma values from the text (0.1/0.2 vs 2/5).",
))

# --- ComFedL (journal) section 5.2: DA-MAML personalized FL ---------------------------------

DAMAML_FULL = Full(task="damaml-cifar10", rounds=100)

register(Claim(
    name="damaml-fig4",
    source="ComFedL journal, section 5.2, Figure 4",
    title="Personalized FL on heterogeneous data: ComFedL-DAMAML vs FedAvg, FedMAML, TR-MAML, Ditto",
    task="damaml-mnist5k", rounds=10,
    full=DAMAML_FULL,
    variants=(
        V("fedavg", "fedavg"),
        V("fedmaml", "fedmaml"),
        V("tr-maml", "tr-maml"),
        V("ditto", "ditto"),
        V("comfedl-maml", "comfedl-maml"),
        V("comfedl-damaml", "comfedl-damaml"),  # the journal's lr 0.1, gamma 0.5
        V("comfedl-damaml-g1", "comfedl-damaml", lr=0.05, gamma=1),
        V("comfedl-damaml-lse", "comfedl-damaml", normalizer="lse"),  # lr 0.1, gamma 0.5, eq. (5) form
    ),
    alts=(Alt(LSE, {"comfedl-damaml": "comfedl-damaml-lse"}),),
    metrics=("val_loss", "val_acc", "val_acc_worst"),
    panels=(Panel("val_loss", "validation loss"), Panel("val_acc", "validation accuracy")),
    paper_says="ComFedL-DAMAML beats FedAvg, FedMAML, TR-MAML, Ditto (and ComFedL-MAML) in validation loss and accuracy",
    checks=(
        Better("val_acc", "comfedl-damaml", ("fedavg", "fedmaml", "tr-maml", "ditto", "comfedl-maml")),
        Better("val_loss", "comfedl-damaml", ("fedavg", "fedmaml", "tr-maml", "ditto", "comfedl-maml"), mode="min"),
    ),
    tiny=DAMAML_TINY,
    notes="Offline: MNIST subset, 10 rounds, CNN4 with 16 filters (full: CIFAR-10, 100 rounds, 64 filters). "
          "Accuracy after one adaptation step (FedAvg too); Ditto: its personal model.",
))

register(Claim(
    name="damaml-fig5",
    source="ComFedL journal, section 5.2, Figure 5",
    title="ComFedL-DAMAML: synchronization gap tau (top row) and gamma (bottom row)",
    task="damaml-mnist5k", rounds=10,
    full=DAMAML_FULL,
    variants=(
        V("tau1", "comfedl-damaml", group="tau", tau=1),
        V("tau5", "comfedl-damaml", group="tau", tau=5),
        V("tau10", "comfedl-damaml", group="tau", tau=10),
        V("gamma0.1", "comfedl-damaml", group="gamma", gamma=0.1),
        V("gamma0.5", "comfedl-damaml", group="gamma", gamma=0.5),
        V("gamma1", "comfedl-damaml", group="gamma", gamma=1),
        V("gamma5", "comfedl-damaml", group="gamma", gamma=5),
    ),
    metrics=("val_loss", "val_acc", "mean:val_acc"),
    panels=(
        Panel("val_loss", "tau: validation loss", group="tau"),
        Panel("val_acc", "tau: validation accuracy", group="tau"),
        Panel("val_loss", "gamma: validation loss", group="gamma"),
        Panel("val_acc", "gamma: validation accuracy", group="gamma"),
    ),
    paper_says="larger tau converges faster; robust to gamma (final accuracies within 0.02)",
    checks=(Better("mean:val_acc", "tau10", ("tau1",)), Close("val_acc", "gamma0.1", "gamma5", 0.02)),
    tiny=DAMAML_TINY,
))

register(Claim(
    name="damaml-fig6",
    source="ComFedL journal, section 5.2, Figure 6",
    title="Data heterogeneity rho: ComFedL-DAMAML, ComFedL-MAML and FedAvg",
    task="damaml-mnist5k", rounds=10,
    full=DAMAML_FULL,
    variants=tuple(
        V(f"rho{r}-{a}", a, group=f"rho{r}", rho=r)
        for r in (0.1, 0.28, 0.5, 0.8) for a in ("comfedl-damaml", "comfedl-maml", "fedavg")
    ),
    metrics=("val_acc", "val_acc_worst"),
    panels=tuple(Panel("val_acc", f"rho {r}: validation accuracy", group=f"rho{r}") for r in (0.1, 0.28, 0.5, 0.8)),
    paper_says="ComFedL-(DA)MAML beats FedAvg at every rho, more so at large rho",
    checks=tuple(Better("val_acc", f"rho{r}-comfedl-maml", (f"rho{r}-fedavg",)) for r in (0.1, 0.28, 0.5, 0.8)),
    tiny=DAMAML_TINY,
    notes="The figure's text names ComFedL-MAML; ComFedL-DAMAML is run too.",
))

# --- Local-SCGDM section 5.1: federated MAML on sinusoids -----------------------------------

SINE = dict(task="maml-sinusoid", rounds=200, eval_every=10, tiny=SINE_TINY, x_label="local iteration",
            metrics=("train_loss", "val_loss"), panels=LOSS_PANELS, ncols=2)
P = 5  # the paper's p: x axis in local iterations = round * p

register(Claim(
    name="scgdm-fig2",
    source="Local-SCGDM, section 5.1, Figure 2",
    title="Sinusoid regression: Local-SCGDM vs Local-BSGD, Local-SCGD, Local-MOML",
    variants=(
        V("local-bsgd", "local-bsgd", x_scale=P),
        V("local-scgd", "local-scgd", x_scale=P),
        V("local-moml", "local-moml", x_scale=P),
        V("local-scgdm-shared", "local-scgdm", x_scale=P, per_task_state=False),
        V("local-scgdm-pertask", "local-scgdm", x_scale=P, per_task_state=True),
    ),
    paper_says="Local-SCGDM (per-task u, the paper's comparison) has the lowest train and validation loss",
    checks=(
        Better("val_loss", "local-scgdm-pertask", ("local-bsgd", "local-scgd", "local-moml"), mode="min"),
        Better("train_loss", "local-scgdm-pertask", ("local-bsgd", "local-scgd", "local-moml"), mode="min"),
    ),
    notes="200 rounds of p = 5 local steps (T = 1000).",
    **SINE,
))

register(Claim(
    name="scgdm-fig3",
    source="Local-SCGDM, section 5.1, Figure 3",
    title="Local-SCGDM: inner-state coefficient gamma",
    variants=tuple(V(f"gamma{g}", "local-scgdm", x_scale=P, gamma=g) for g in (0.3, 0.5, 0.7, 0.9)),
    paper_says="smaller gamma fits the training tasks faster; gamma 0.3 overfits; best validation loss at gamma 0.7",
    checks=(
        Better("val_loss", "gamma0.7", ("gamma0.3", "gamma0.5", "gamma0.9"), mode="min"),
        Better("train_loss", "gamma0.3", ("gamma0.9",), mode="min"),
    ),
    notes="One inner state u per task (the task default, as in the paper's comparison); --set per_task_state=false for one shared u.",
    **SINE,
))

register(Claim(
    name="scgdm-fig4",
    source="Local-SCGDM, section 5.1, Figure 4",
    title="Local-SCGDM: local steps p (T = 1000 iterations: rounds = 1000 / p)",
    variants=tuple(
        V(f"p{p}", "local-scgdm", x_scale=p, rounds=1000 // p, eval_every=max(1, 50 // p), p=p) for p in (1, 5, 10, 20)
    ),
    paper_says="good at every p, best train and validation loss at p = 5",
    checks=(
        Better("val_loss", "p5", ("p1", "p10", "p20"), mode="min"),
        Better("train_loss", "p5", ("p1", "p10", "p20"), mode="min"),
    ),
    notes="--rounds R scales every variant's rounds by R / 200 (p = 5 gets R).",
    **SINE,
))

register(Claim(
    name="scgdm-fig5",
    source="Local-SCGDM, section 5.1, Figure 5",
    title="Local-SCGDM: momentum coefficient alpha",
    variants=tuple(V(f"alpha{a}", "local-scgdm", x_scale=P, alpha=a) for a in (0.5, 0.7, 0.8, 0.9)),
    paper_says="best train and validation loss at alpha 0.9",
    checks=(
        Better("val_loss", "alpha0.9", ("alpha0.5", "alpha0.7", "alpha0.8"), mode="min"),
        Better("train_loss", "alpha0.9", ("alpha0.5", "alpha0.7", "alpha0.8"), mode="min"),
    ),
    **SINE,
))

# --- FedDRO -----------------------------------------------------------------------------------

TOY = {"n_clients": 4, "spread": 1.0, "batch_size": None, "lr": 0.2, "sync_every": 8}

register(Claim(
    name="feddro-thm41",
    source="FedDRO, section 4, Theorem 4.1",
    title="Vanilla FedAvg for CO (cases I and II) stalls; FedDRO converges (toy-co, I = 8)",
    task="toy-co", rounds=60, settings=TOY,
    variants=(
        V("fedavg-co-I", "fedavg-co", case=1),
        V("fedavg-co-II", "fedavg-co", case=2),
        V("feddro", "feddro", beta=0.5),
    ),
    metrics=("grad_norm", "objective"),
    panels=(Panel("grad_norm", "||grad Phi(x-bar)||", log=True), Panel("objective", "Phi(x-bar)")),
    paper_says="FedAvg for CO does not reach a stationary point (grad norm bounded away from 0); FedDRO does",
    checks=(
        Bound("fedavg-co-I", "grad_norm", ">", 0.02),
        Bound("fedavg-co-II", "grad_norm", ">", 0.02),
        Bound("feddro", "grad_norm", "<", 0.02),  # below the floor where FedAvg-CO stalls ...
        Better("grad_norm", "feddro", ("fedavg-co-I", "fedavg-co-II"), mode="min"),  # ... and still falling
    ),
    notes="Deterministic instance (g_k(x) = a_k x + b_k, f = y^2/2, no sampling noise); the seed draws a_k, b_k. "
    "FedDRO converges linearly at a seed-dependent rate (tests/test_feddro.py: 1e-8 at seed 0); FedAvg-CO stops at a fixed point.",
))

register(Claim(
    name="feddro-fig2",
    source="FedDRO, section 6, Figure 2 (and Figure 3, right)",
    title="FedDRO: local updates I per round",
    task="feddro-digits-st", rounds=30, eval_every=5,
    full=Full(task="feddro-cifar10st", rounds=120, eval_every=5),
    variants=tuple(V(f"I{i}", "feddro", sync_every=i) for i in (1, 2, 4, 8, 16, 32, 64)),
    metrics=("train_acc", "val_acc", "val_acc_worst", "objective", "grad_norm"),
    panels=(Panel("train_acc", "train accuracy"), Panel("val_acc", "test accuracy")),
    paper_says="accuracy improves as I grows, then saturates (beyond about I = 32)",
    checks=(Better("val_acc", "I16", ("I1",)), Close("val_acc", "I32", "I64", 0.01)),
    tiny=DIGITS_TINY,
    notes="Offline: scikit-learn digits, logistic regression (paper: CIFAR10-ST, ResNet-20). Task defaults: lr 0.1, beta 0.5, batch 16.",
))

register(Claim(
    name="feddro-fig1",
    source="FedDRO, section 6, Figure 1",
    title="FedDRO (I = 1) vs the parallel baselines (MBSGD for CO, FastDRO, PDSGD) on step-imbalanced data",
    task="feddro-digits-st", rounds=30, eval_every=5,
    full=Full(task="feddro-cifar10st", rounds=120, eval_every=5),
    variants=(V("feddro", "feddro"), V("mbsgd-co", "mbsgd-co"), V("fastdro", "fastdro"), V("pdsgd", "pdsgd")),
    metrics=("train_acc", "val_acc", "val_acc_worst", "objective"),
    panels=(Panel("train_acc", "train accuracy"), Panel("val_acc", "test accuracy")),
    paper_says="FedDRO has better train accuracy and comparable (within 0.02) test accuracy than the baselines",
    checks=(Better("train_acc", "feddro", ("mbsgd-co", "fastdro", "pdsgd")), Close("val_acc", "feddro", "mbsgd-co", 0.02)),
    tiny=DIGITS_TINY,
    notes="FastDRO with the KL objective's batch weights equals MBSGD-CO's plug-in gradient "
    "(same pooled batch); PDSGD is our reading (primal-dual SGD with per-sample dual weights).",
))

register(Claim(
    name="feddro-fig3",
    source="FedDRO, section 6, Figure 3 (first two panels)",
    title="Fairness (equality of opportunity): FedDRO vs GCIVR and the unconstrained parallel SGD",
    task="fair-synth", rounds=300, eval_every=10,
    full=Full(task="fair-adult", rounds=1000, eval_every=20),
    variants=(V("feddro", "feddro"), V("gcivr", "gcivr"), V("unconstrained", "unconstrained")),
    metrics=("val_acc", "val_violation", "train_acc", "train_violation", "val_acc_worst", "objective"),
    panels=(
        Panel("val_acc", "test accuracy"),
        Panel("val_violation", "test constraint violation: max_k |TPR_k - TPR|"),
        Panel("train_acc", "train accuracy"),
        Panel("train_violation", "train constraint violation"),
    ),
    paper_says="FedDRO beats GCIVR and the unconstrained baseline in test accuracy and matches GCIVR's "
    "constraint violation (within 0.03)",
    checks=(Better("val_acc", "feddro", ("gcivr", "unconstrained")), Close("val_violation", "feddro", "gcivr", 0.03)),
    tiny=FAIR_TINY,
    notes="Offline: fair-synth, a seeded synthetic stand-in for Adult (three groups with different positive rates "
    "and feature noise; --full: the UCI Adult files in --data-dir, protected attribute race). Logistic regression, "
    "8 clients, batch 16, I = 1, lr 0.1 for every method. The penalty follows Haddadpour et al.'s code "
    "(log-sum-exp of the group constraints) with our TPR reference (all positives) and temperature 0.1; their "
    "exact form is fair_reference=all fair_temp=1. GCIVR: plain steps (theirs: Adagrad), checkpoints on all "
    "local data every 100 steps.",
))


# --- A heterogeneous system (issue 26; not a paper's figure) ----------------------------------

register(Claim(
    name="system-drop-vs-wait",
    source="issue 26 (not a paper's figure): robust FL on imbalanced MNIST on simulated phones (docs/system.md)",
    title="Slow clients dropped (over-selection, the faster half kept) vs waited for: worst-client accuracy",
    task="dro-mnist5k", rounds=200, eval_every=10,
    settings={"clients_per_round": 5},
    variants=(
        V("comfedl-wait", "comfedl", normalizer="lse", system="mobile-sync"),
        V("comfedl-drop", "comfedl", normalizer="lse", system="mobile-fastest"),
        V("fedavg-wait", "fedavg", system="mobile-sync"),
        V("fedavg-drop", "fedavg", system="mobile-fastest"),
        V("qfedavg-wait", "qfedavg", system="mobile-sync"),
        V("qfedavg-drop", "qfedavg", system="mobile-fastest"),
    ),
    metrics=("val_acc_worst", "val_acc", "sim_time", "wasted_s", "values", "bytes_down", "dropped_bytes_down",
             "dropped_samples"),
    panels=(Panel("val_acc_worst", "worst-client validation accuracy"), Panel("val_acc", "average validation accuracy"),
            Panel("sim_time", "simulated seconds")),
    ncols=3,
    paper_says="(our expectation, not a paper's) waiting for slow clients, the DRO algorithm (ComFedL) has a better "
    "worst-client accuracy than FedAvg and q-FedAvg; dropping them (the faster half of twice the cohort kept) "
    "lowers ComFedL's worst-client accuracy and the simulated time",
    checks=(
        Better("val_acc_worst", "comfedl-wait", ("fedavg-wait", "qfedavg-wait")),
        Better("val_acc_worst", "comfedl-wait", ("comfedl-drop",)),
        Better("sim_time", "comfedl-drop", ("comfedl-wait",), mode="min"),
    ),
    tiny=DRO_TINY,
    notes="10 clients, m = 5 a round. Both systems use the `mobile` profile's devices and keep every client online: "
    "`mobile-sync` draws 5 clients uniformly and waits for the slowest (the same cohorts as without --system), "
    "`mobile-fastest` draws 10 and keeps the 5 predicted to finish first, so the same slow devices are dropped "
    "every round. ComFedL with normalizer=lse (gamma 0.2 as printed diverges at round 1, see comfedl-fig2).",
))


# --- The papers' cost claims, against the cost ledger's axes (issue 26, part 4) ---------------

EPS = "0.8,0.65,0.5"  # grad-norm targets for the measured exponent (digits, logistic regression)

register(Claim(
    name="feddro-cost",
    source="FedDRO, section 1 and Corollary 5.3 (O(eps^-2) samples, O(eps^-3/2) shared parameters for "
    "E||grad||^2 <= eps; embeddings cheap to share)",
    title="FedDRO (I = 8) vs FedAvg-CO and the parallel baselines against real values communicated",
    task="feddro-digits-st", rounds=30, eval_every=1, x_axis="values",
    variants=(
        V("feddro-I8", "feddro", sync_every=8),
        V("feddro-I1", "feddro", sync_every=1),
        V("fedavg-co-I8", "fedavg-co", sync_every=8),
        V("mbsgd-co", "mbsgd-co"),
        V("fastdro", "fastdro"),
        V("pdsgd", "pdsgd"),
    ),
    metrics=("reach:values:grad_norm<0.65", "reach:values:grad_norm<0.5", f"slope:values:grad_norm:{EPS}",
             "grad_norm", "objective", "train_acc", "values", "samples", "oracle_calls"),
    panels=(Panel("grad_norm", "||grad Phi(x-bar)|| against values sent", log=True),
            Panel("objective", "Phi(x-bar) against values sent"), Panel("train_acc", "train accuracy against values sent")),
    ncols=3,
    paper_says="FedDRO with local updates (I = 8) reaches a stationarity target with fewer real values "
    "communicated than the parallel baselines (MBSGD-CO, FastDRO, PDSGD: one exchange per sample step)",
    checks=(Better("reach:values:grad_norm<0.65", "feddro-I8", ("mbsgd-co", "fastdro", "pdsgd"), mode="min"),
            Better("reach:values:grad_norm<0.5", "feddro-I8", ("mbsgd-co", "fastdro", "pdsgd"), mode="min")),
    tiny=DIGITS_TINY,
    notes="The paper's O(eps^-3/2) is for E||grad||^2 <= eps (an upper bound): in e = ||grad||, values ~ e^-3, "
    f"an exponent of 3. `slope:` fits log(values to reach ||grad|| < e) against log(1/e) for e in {EPS} per run (a measured exponent over a short range, where the "
    "curve is still in its transient: not the asymptotic rate). The gap between values_down of FedDRO and "
    "FedAvg-CO is the embedding FedDRO shares (one value per client and sync) vs FedAvg-CO's extra exchange.",
))

SCGDM_EPS = "3.4,3.25,3.1"  # validation-loss targets (sinusoid MSE: 3.6 at round 0, about 3.0 at 200)

register(Claim(
    name="scgdm-cost",
    source="Local-SCGDM, abstract and section 1 (sample complexity O(eps^-4), communication O(eps^-3); "
    "Local-BSGD O(eps^-8) / O(eps^-4), Local-SCGD O(eps^-5) / O(eps^-3))",
    title="Local-SCGDM vs Local-SCGD, Local-MOML, Local-BSGD against values sent and samples drawn",
    task="maml-sinusoid", rounds=200, eval_every=5, tiny=SINE_TINY, x_axis="values",
    variants=(
        V("local-bsgd", "local-bsgd"),
        V("local-scgd", "local-scgd"),
        V("local-moml", "local-moml"),
        V("local-scgdm", "local-scgdm", per_task_state=True),
    ),
    metrics=("reach:values:val_loss<3.25", "reach:samples:val_loss<3.25", f"slope:values:val_loss:{SCGDM_EPS}",
             f"slope:samples:val_loss:{SCGDM_EPS}", "val_loss", "train_loss", "values", "samples", "oracle_calls"),
    panels=(Panel("val_loss", "validation loss against values sent", log=True),
            Panel("train_loss", "train loss against values sent", log=True)),
    paper_says="Local-SCGDM reaches a loss target with fewer values communicated and fewer samples than "
    "Local-SCGD, Local-MOML and Local-BSGD",
    checks=(Better("reach:values:val_loss<3.25", "local-scgdm", ("local-bsgd", "local-scgd", "local-moml"), mode="min"),
            Better("reach:samples:val_loss<3.25", "local-scgdm", ("local-bsgd", "local-scgd", "local-moml"), mode="min")),
    notes="The paper's rates are for an eps-accurate stationary point; we measure the validation loss (its figures' metric), "
    f"so the `slope:` exponents (log cost to reach loss < e vs log(1/e), e in {SCGDM_EPS}) are not the same "
    "quantity as the rates and are shown beside them, not checked. p = 5 local steps a round, as in scgdm-fig2.",
))

TAU_VALUES = 1.6e6  # values_up: the same communication budget for every tau

register(Claim(
    name="comfedl-tau-cost",
    source="ComFedL journal, section 3 (the synchronization gap tau controls the communication cost; rate "
    "O(1/T^(1-a1) + tau/T^a1 + ...), O(1/sqrt(T)) with tau = O(1)) and section 5.1, Figure 3",
    title="ComFedL at equal values sent (--budget values_up): synchronization gap tau",
    task="dro-mnist5k", rounds=200, eval_every=5, x_axis="values",
    variants=tuple(V(f"tau{t}", "comfedl", tau=t, normalizer="lse", budget={"values_up": TAU_VALUES})
                   for t in (1, 5, 10)),
    metrics=("val_acc", "val_acc_worst", "train_acc", "values", "samples", "oracle_calls"),
    panels=(Panel("val_acc", "average validation accuracy"), Panel("val_acc_worst", "worst-client validation accuracy")),
    paper_says="(our reading of Figure 3 at equal cost) at the same values communicated, more local steps "
    "(larger tau) reach a better accuracy",
    checks=(Better("val_acc", "tau10", ("tau1",)), Better("val_acc", "tau5", ("tau1",))),
    tiny=DRO_TINY,
    notes=f"Every run stops at the first round its values_up reaches {TAU_VALUES:g} (--budget), so every tau sends "
    "the same values; the samples column shows what the extra local steps cost in samples. normalizer=lse "
    "(gamma 0.2 as printed diverges, see comfedl-fig2).",
))


# --- Asynchronous aggregation on the simulated clock (issue 31) -------------------------------

SYNTH = {"n_clients": 100, "clients_per_round": 10, "lr": 0.05, "tau": 5}  # FedProx's Synthetic(1, 1), 100 phones
SYNTH_TINY = {"n_clients": 20, "clients_per_round": 4, "max_samples": 100, "val_per_client": 5}
FEDBUFF_TIME = 30.0  # simulated seconds: every variant runs until its sim_time reaches it
FEDBUFF_CK = {"concurrency": 10, "buffer": 3}  # C = the synchronous cohort m, K = 3 arrivals a server step

register(Claim(
    name="fedbuff-speed",
    source="FedBuff (Nguyen et al., AISTATS 2022), abstract and section 5: time to a target accuracy (arXiv v1: "
    "up to 3.8x faster than synchronous FL such as FedAvgM, up to 2.5x faster than FedAsync; AISTATS: 3.3x, 2.5x)",
    title="FedBuff vs synchronous FedAvg (waiting, over-selection) vs FedAsync: simulated time to a target accuracy",
    task="synthetic", rounds=150, eval_every=2, x_axis="sim_time", settings=SYNTH,
    variants=(
        V("sync", "fedavg", system="mobile-sync", budget={"sim_time": FEDBUFF_TIME}),
        V("sync-os", "fedavg", system="mobile-fastest", rounds=300, eval_every=4, budget={"sim_time": FEDBUFF_TIME}),
        V("fedbuff", "fedavg", system="mobile-sync", rounds=1000, eval_every=12, budget={"sim_time": FEDBUFF_TIME},
          aggregation="buffered", **FEDBUFF_CK),
        V("fedasync", "fedavg", system="mobile-sync", rounds=3000, eval_every=36, budget={"sim_time": FEDBUFF_TIME},
          aggregation="async", concurrency=10),
    ),
    metrics=("reach:sim_time:val_acc>0.4", "reach:sim_time:val_acc>0.35", "reach:values:val_acc>0.4", "val_acc",
             "sim_time", "values", "staleness_mean"),
    panels=(Panel("val_acc", "average validation accuracy against simulated time"),
            Panel("train_loss", "train loss against simulated time")),
    paper_says="FedBuff reaches a target accuracy in less time than synchronous FedAvg (with and without "
    "over-selection) and than FedAsync (up to 3.8x and 2.5x faster in the paper)",
    checks=(Better("reach:sim_time:val_acc>0.4", "fedbuff", ("sync", "sync-os", "fedasync"), mode="min"),),
    tiny=SYNTH_TINY,
    notes="100 clients of FedProx's Synthetic(1, 1), logistic regression, FedAvg lr 0.05, tau 5 local steps of 32 "
    "samples; every client a phone of the `mobile` profile, always online. Synchronous FedAvg: 10 clients a round, "
    "the server waits for the slowest (`mobile-sync`) or draws 20 and keeps the 10 predicted to finish first "
    "(`mobile-fastest`; the paper's over-selection keeps the first of 1.3x). FedBuff: C = 10 clients in flight "
    "(the synchronous cohort), K = 3, server step 1, no server momentum (the paper's baseline is FedAvgM, ours "
    "FedAvg); FedAsync: C = 10, alpha 0.6, polynomial staleness weight a = 0.5 (the defaults, docs/system.md). "
    "Every run stops at 30 simulated seconds (--budget); evaluations every ~0.5 simulated seconds. The paper's "
    "populations (thousands in flight) and tasks (CelebA, Sent140, CIFAR-10) are far larger.",
))

SCGDM_TIME = 15.0  # simulated seconds
SCGDM_VALUES = 8.8e5  # values_up: Local-BSGD's 100 synchronous rounds of 5 clients
STALE = {"aggregation": "buffered", "concurrency": 5, "buffer": 2}  # FedBuff: all 5 clients in flight, K = 2


def _scgdm_pair(tag: str, group: str, budget: dict[str, float], **run) -> tuple:
    """Local-SCGDM (per-task u) and Local-BSGD with the same system, aggregation and budget."""
    rounds, every = (700, 25) if run else (200, 5)  # caps: every run stops at its budget first
    return tuple(V(f"{name}-{tag}", algo, group=group, system="mobile-sync", rounds=rounds, eval_every=every,
                   budget=budget, **run) for name, algo in (("scgdm", "local-scgdm"), ("bsgd", "local-bsgd")))


register(Claim(
    name="scgdm-stale",
    source="issue 31 (not a paper's): Local-SCGDM 5.1 (scgdm-fig2) under buffered asynchronous aggregation",
    title="Does Local-SCGDM's advantage over Local-BSGD (FedAvg on the MAML objective) survive staleness?",
    task="maml-sinusoid", rounds=200, eval_every=5, x_axis="sim_time", tiny=SINE_TINY,
    variants=(
        *_scgdm_pair("sync-t", "time", {"sim_time": SCGDM_TIME}),
        *_scgdm_pair("buff-t", "time", {"sim_time": SCGDM_TIME}, **STALE),
        *_scgdm_pair("sync-v", "values", {"values_up": SCGDM_VALUES}),
        *_scgdm_pair("buff-v", "values", {"values_up": SCGDM_VALUES}, **STALE),
    ),
    metrics=("val_loss", "train_loss", "mean:val_loss", "sim_time", "values", "samples", "staleness_mean"),
    panels=(Panel("val_loss", "equal simulated time: validation loss", group="time"),
            Panel("val_loss", "equal values sent: validation loss", group="values")),
    paper_says="(our question, not a paper's) Local-SCGDM's lower validation loss than Local-BSGD, synchronous "
    "(scgdm-fig2), survives buffered asynchronous aggregation, at equal simulated time and at equal values sent",
    checks=(
        Better("val_loss", "scgdm-sync-t", ("bsgd-sync-t",), mode="min"),
        Better("val_loss", "scgdm-buff-t", ("bsgd-buff-t",), mode="min"),
        Better("val_loss", "scgdm-sync-v", ("bsgd-sync-v",), mode="min"),
        Better("val_loss", "scgdm-buff-v", ("bsgd-buff-v",), mode="min"),
    ),
    notes="maml-sinusoid (5 clients, the paper's settings, p = 5 local steps a round), every client a phone of the "
    "`mobile` profile, always online (`mobile-sync`). Synchronous: all 5 clients a round. Buffered (FedBuff, a "
    "research extension for compositional algorithms, docs/system.md): C = 5 in flight, K = 2, polynomial staleness "
    "weight; Local-SCGDM's per-task u and momentum travel with a stale contribution as the engine defines it. "
    "'t' variants stop at 15 simulated seconds, 'v' variants at 8.8e5 values sent up (Local-SCGDM sends u with the "
    "model: twice Local-BSGD's values a client update, so half the updates). The figure's x axis is simulated "
    "time for both groups.",
))


# --- Compression and client-level DP (issue 34): payload transforms, docs/compression.md ------

TOPK, QSGD = {"compress": {"*": "topk:0.01"}}, {"compress": {"*": "qsgd:4"}}
# bytes_up of 200 rounds of FedAvg's 10 clients, compressed: per client and round, top-k's
# ceil(78 (32 + 13) / 8) = 439 bytes of nw, QSGD's ceil((32 + 7850 * 4) / 8) = 3929, plus n's 8
TOPK_BYTES, QSGD_BYTES = 200 * 10 * (439 + 8), 200 * 10 * (3929 + 8)

register(Claim(
    name="compress-fedavg",
    source="Stich et al. 2018 (sparsified SGD with memory), Karimireddy et al. 2019 (error feedback), "
    "Alistarh et al. 2017 (QSGD): compressed updates lose little accuracy at a large saving",
    title="FedAvg with top-k (error feedback) and QSGD against uncompressed FedAvg, at equal bytes_up",
    task="dro-mnist5k", rounds=200, eval_every=5, x_axis="bytes",
    variants=(
        V("fedavg", "fedavg"),
        V("topk", "fedavg", transforms=TOPK),
        V("qsgd", "fedavg", transforms=QSGD),
        V("fedavg-at-topk-bytes", "fedavg", budget={"bytes_up": TOPK_BYTES}),
        V("fedavg-at-qsgd-bytes", "fedavg", budget={"bytes_up": QSGD_BYTES}),
    ),
    metrics=("val_acc", "val_acc_worst", "bytes_up", "bytes"),
    panels=(Panel("val_acc", "average validation accuracy"), Panel("val_acc_worst", "worst-client validation accuracy")),
    paper_says="at the same rounds, top-k 1% with error feedback and 4-level QSGD stay close to uncompressed FedAvg "
    "(70x and 8x fewer bytes up); at the same bytes up they beat it",
    checks=(Close("val_acc", "topk", "fedavg", 0.03), Close("val_acc", "qsgd", "fedavg", 0.03),
            Better("val_acc", "topk", ("fedavg-at-topk-bytes",)), Better("val_acc", "qsgd", ("fedavg-at-qsgd-bytes",))),
    tiny=DRO_TINY,
    notes="The fedavg-at-*-bytes runs stop (--budget bytes_up) at the bytes the compressed runs send in 200 rounds.",
))

register(Claim(
    name="compress-scgdm-inner",
    source="(our question, issue 34) Local-SCGDM section 5.1's sinusoid regression with compressed exchanges",
    title="Local-SCGDM: compressing only the model x, or also the momentum m and the inner estimate u",
    variants=(
        V("none", "local-scgdm", x_scale=P, per_task_state=False),
        V("x", "local-scgdm", x_scale=P, per_task_state=False, transforms={"compress": {"x": "topk:0.1"}}),
        V("x-m-u", "local-scgdm", x_scale=P, per_task_state=False, transforms={"compress": {"*": "topk:0.1"}}),
        V("x-m-u-qsgd", "local-scgdm", x_scale=P, per_task_state=False, transforms={"compress": {"*": "qsgd:16"}}),
    ),
    task="maml-sinusoid", rounds=200, eval_every=10, tiny=SINE_TINY, x_label="local iteration", x_axis="bytes",
    metrics=("val_loss", "train_loss", "bytes", "reach:bytes:val_loss<3.25"),
    panels=LOSS_PANELS,
    paper_says="(our hypothesis) compressing the inner estimate u and the momentum m too, with error feedback, "
    "does not break convergence, and reaches the loss target with fewer bytes",
    checks=(Close("val_loss", "x-m-u", "x", 0.1),
            Better("reach:bytes:val_loss<3.25", "x-m-u", ("x", "none"), mode="min")),
    notes="Shared u (per_task_state=False), so that u and m travel each round; top-k 10% with error feedback, "
    "and 16-level QSGD (unbiased, no feedback) on all three.",
))

DP = {"dp_clip": 0.5, "dp_delta": 1e-5}

register(Claim(
    name="dp-dro",
    source="(our question, issue 34) DP-FedAvg (McMahan et al. 2018) on ComFedL's imbalanced MNIST (section 5.1)",
    title="Client-level DP: mean and worst-client accuracy of FedAvg and ComFedL against epsilon",
    task="dro-mnist5k", rounds=100, eval_every=5,
    variants=(
        V("fedavg", "fedavg"),
        V("fedavg-z0.5", "fedavg", transforms={**DP, "dp_noise": 0.5}),
        V("fedavg-z2", "fedavg", transforms={**DP, "dp_noise": 2.0}),
        V("comfedl", "comfedl", gamma=1),
        V("comfedl-z0.5", "comfedl", gamma=1, transforms={**DP, "dp_noise": 0.5}),
        V("comfedl-z2", "comfedl", gamma=1, transforms={**DP, "dp_noise": 2.0}),
    ),
    metrics=("val_acc", "val_acc_worst", "epsilon"),
    panels=(Panel("val_acc", "average validation accuracy"), Panel("val_acc_worst", "worst-client validation accuracy")),
    paper_says="(our question) DP costs the worst client more than the mean, and the DRO objective (ComFedL) keeps "
    "a better worst client than FedAvg at the same epsilon",
    checks=(Better("val_acc_worst", "comfedl-z0.5", ("fedavg-z0.5",)), Better("val_acc_worst", "comfedl-z2", ("fedavg-z2",))),
    tiny=DRO_TINY,
    notes="All 10 clients each round (q = 1: no amplification by sampling), C = 0.5; epsilon at delta 1e-5 "
    "from dp-accounting (docs/compression.md). ComFedL at gamma 1 with the paper's normalizer: with "
    "normalizer=lse its exchanged loss values f_i(w) (about 2.3) are clipped to C and noised, the log-mean-exp "
    "normalizer is then far below the losses and the first step diverges. The gap mean - worst is read from the table.",
))
