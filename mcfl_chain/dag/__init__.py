"""The model DAG: deterministic model ids and the DAG rebuilt from chain events."""

from mcfl_chain.dag.model_id import ROOT_MODEL_ID, model_id, update_id

__all__ = ["ROOT_MODEL_ID", "model_id", "update_id"]
