"""Each official task is read from an index of the one lm_eval/tasks folder that defines it (fastdllm_core.evaluation
.tasks._task_manager: indexing all of lm-eval's task YAMLs cost 10-40 s in every evaluation job), and that index
gives exactly what the whole index gives: the same leaf tasks, each with the same resolved config."""
import pytest

from fastdllm_core.evaluation import tasks


@pytest.fixture(scope="module")
def whole_index():
    from lm_eval.tasks import TaskManager

    return TaskManager()


@pytest.mark.parametrize("name", sorted(tasks.LM_EVAL_FOLDER))
def test_the_folder_index_gives_the_whole_index_configs(whole_index, name):
    folder = tasks._task_manager(name)
    assert len(folder.task_index) < len(whole_index.task_index) / 10  # the point: a small index
    leaves = tasks.leaf_tasks(folder, name)
    assert leaves == tasks.leaf_tasks(whole_index, name) and leaves
    for leaf in leaves:
        assert repr(tasks.official_config(folder, leaf)) == repr(tasks.official_config(whole_index, leaf)), leaf


def test_every_official_task_used_has_its_folder():
    used = set(tasks.LM_EVAL_NAME.values())
    assert used <= set(tasks.LM_EVAL_FOLDER), used - set(tasks.LM_EVAL_FOLDER)


def test_stand_in_configs_use_an_empty_index():
    assert len(tasks._task_manager(None).task_index) == 0
