"""Table 1's difference pairs say what they are (workflow/fastdllm_dag/plan/pairs.py): a row's baseline may be any row,
its ``relation`` is checked where the config can show it, and the labels of the summary page and Table 1's notes follow
it; each baseline model's departures from its authors' evaluation reach the notes."""
import copy
from pathlib import Path

import pytest
import yaml

from fastdllm_dag.job import report_specs
from fastdllm_dag.plan import checks as plan_checks
from fastdllm_dag.plan import pairs
from fastdllm_dag.plan import points as plan_points

ROOT = Path(__file__).resolve().parents[1]

SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def load(name):
    return yaml.safe_load((ROOT / "config" / name).read_text())


def row(cfg, model):
    return next(r for r in cfg["tables"]["table1"]["rows"] if r["model"] == model)


def test_embedded_default_pairs_keep_their_labels():
    cfg = load("config.yaml")
    plan_checks.check(cfg)
    got = [(c["a"], c["b"], c["why"]) for c in report_specs.summary_comparisons(cfg)]
    adapted = "Table 1: the row against the AR model it was adapted from"
    assert got[:4] == [("ar_base", "ntp", adapted), ("ar_base", "bd_pad_cm", adapted), ("ar_base", "dream", adapted),
                       ("bd_pad_cm", "dream", "Table 1: two diffusion recipes, same base, data and budget")]
    assert report_specs.pair_notes(cfg) == [] and report_specs.departure_notes(cfg, list(cfg["models"])) == []


def test_paper_pairs_say_what_they_are():
    cfg = load("paper.yaml")
    plan_checks.validate_schema(cfg, SCHEMA)
    plan_checks.check(cfg)
    why = {(c["a"], c["b"]): c["why"] for c in report_specs.summary_comparisons(cfg)}
    assert why[("llada_8b", "llada_1.5_8b")].startswith("Table 1: two models of the same family (LLaDA 1.5 is "
                                                        "LLaDA-8B-Instruct after VRPO")
    assert why[("qwen2.5_7b", "dream_7b")].startswith("Table 1: two models from the same pretrained base")
    assert why[("qwen2.5_7b", "fastdllm_v2_7b")] == "Table 1: the row against the AR model it was adapted from"
    # released diffusion models of different bases, data and budgets are not paired (LLaDA vs Dream, 1.5B vs 7B)
    assert not any("same base, data and budget" in w for w in why.values())
    assert ("llada_8b", "dream_7b") not in why and ("fastdllm_v2_1.5b", "fastdllm_v2_7b") not in why
    notes = report_specs.pair_notes(cfg)
    assert len(notes) == 1 and "LLaDA-1.5 - LLaDA-8B-Instruct: two models of the same family" in notes[0]
    assert "Dream-v0-Instruct-7B - Qwen2.5-7B-Instruct: two models from the same pretrained base" in notes[0]


def test_relations_the_config_contradicts_are_refused():
    cfg = load("paper.yaml")
    bad = copy.deepcopy(cfg)
    row(bad, "dream_7b")["relation"] = "same_base_data_budget"
    with pytest.raises(plan_checks.ConfigError, match=r"rows\[7\]\.relation: same_base_data_budget does not hold "
                                                      r"for 'dream_7b' and 'qwen2.5_7b': 'dream_7b' is not trained"):
        plan_checks.check(bad)
    bad = copy.deepcopy(cfg)
    del row(bad, "llada_1.5_8b")["relation_note"]
    with pytest.raises(plan_checks.ConfigError, match=r"rows\[6\]\.relation_note: relation same_family"):
        plan_checks.check(bad)
    bad = copy.deepcopy(cfg)
    row(bad, "llada_1.5_8b")["relation"] = "cousins"
    with pytest.raises(plan_checks.ConfigError, match="cousins"):
        plan_checks.validate_schema(bad, SCHEMA)
    with pytest.raises(plan_checks.ConfigError, match=r"rows\[6\]\.relation: 'cousins' is not one of"):
        plan_checks.check(bad)
    bad = copy.deepcopy(cfg)
    row(bad, "llama3.2_1b")["relation"] = "same_size"
    with pytest.raises(plan_checks.ConfigError, match=r"rows\[0\]\.relation: .*set baseline too"):
        plan_checks.check(bad)


def test_same_base_data_budget_is_checked_on_the_training_config():
    cfg = load("config.yaml")
    ok = copy.deepcopy(cfg)
    row(ok, "dream").update(baseline="bd_pad_cm", relation="same_base_data_budget")  # a diffusion baseline
    plan_checks.check(ok)
    assert report_specs.summary_comparisons(ok)[2]["why"] == \
        "Table 1: two diffusion recipes, same base, data and budget"
    assert pairs.same_base_data_budget(ok, "dream", "bd_pad_cm") is None
    bad = copy.deepcopy(ok)
    bad["models"]["dream"]["train"]["optim"] = {"max_steps": 400}
    with pytest.raises(plan_checks.ConfigError, match=r"different training budgets \(optim max_steps\)"):
        plan_checks.check(bad)
    auto = copy.deepcopy(cfg)  # no declared pair: the automatic one appears only while the budgets agree
    auto["models"]["dream"]["train"]["optim"] = {"max_steps": 400}
    assert all(c["why"] != "Table 1: two diffusion recipes, same base, data and budget"
               for c in report_specs.summary_comparisons(auto))
    bad = copy.deepcopy(ok)
    row(bad, "dream")["relation"] = "adapted_from"  # trained here from ar_base, not from bd_pad_cm
    with pytest.raises(plan_checks.ConfigError, match=r"rows\[3\]\.baseline: 'dream' is trained here from ar_base"):
        plan_checks.check(bad)


def test_departures_reach_table1_and_figure1_notes():
    cfg = load("paper.yaml")
    table = report_specs.build_table("table1_main", cfg)
    text = "\n".join(table.notes)
    for lab in ("LLaDA-8B-Instruct", "LLaDA-1.5", "Dream-v0-Instruct-7B"):
        assert f"{lab} departs from its authors' evaluation: " in text
    assert ("mmlu_generative" in text and "computed exactly\n" not in text
            and "against 32 Monte Carlo samples there" in text)
    notes = report_specs.fig1_notes(cfg, plan_points.fig1a_models(cfg))
    assert len(notes) == 1 and notes[0].startswith("Fast-dLLM v1 points: ") and "Dream-v0-Base-7B" in notes[0]
    assert report_specs.fig1_notes(load("config.yaml"), ["ar_base"]) == []


def test_llada_ifeval_at_its_own_setting():
    """eval_llada_opencompass.sh line 34: IFEval at gen_length = steps = block 512 with confidence_eos_eot_inf."""
    d = plan_points.model_decode(load("paper.yaml"), "llada_8b", "ifeval")
    assert (d["max_new_tokens"], d["block_size"], d["steps"], d["confidence_eos_eot_inf"]) == (512, 512, 512, True)
