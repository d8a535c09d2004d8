"""Analysis for the Fast-dLLM v2 reproduction: the paper's numbers (``paper_values``), tables (``tables``) and
figures (``figures``), each a pure function of the tidy results CSVs."""
from . import paper_values  # noqa: F401
