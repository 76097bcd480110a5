"""Stage `judge`: evaluate p_t on T_t -> S_t, O_t, and the verdict the archive and the champion rest on.

A child is judged in up to three steps, each owned by its own module:
- its outcomes on the search splits: every row, or the minibatch rule's sample first (`engine.minibatch`: only a
  child that gains on its sample is evaluated in full); a discarded proposal is recorded as a failed run;
- on whole splits, its training outcome with the rows it holds as examples predicted out of fold
  (`engine.cross_fit`), whose variants' AI usage is booked with the mutator's drafts;
- under `--max-cost`, its deploy cost per 1,000 rows against the limit (`engine.deploy_cost`).
A verdict is `full` when the child was judged on every row (no sample, or a sample it passed) and is within the
cost limit: only a valid child with a full verdict may be admitted or become champion.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from coco_sql.engine.config import RunConfig
from coco_sql.engine.cross_fit import with_honest_train
from coco_sql.engine.deploy_cost import CostVerdict, judge_child
from coco_sql.engine.minibatch import Gate, Minibatch, evaluate_child
from coco_sql.engine.run_state import RunState
from coco_sql.evaluate import SEARCH_SPLITS, Evaluator, Outcome
from coco_sql.llm.usage import Usage
from coco_sql.mutate import Proposal
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.search import Elite


@dataclass(frozen=True)
class Verdict:
    """A judged child: its outcomes per search split, the minibatch gate (None: judged on every row), the cost
    verdict, whether it counts in full (`full`), and the time the judging took (ms)."""

    outcomes: dict[str, Outcome]
    gate: Gate | None
    cost: CostVerdict
    full: bool
    ms: float

    @property
    def val(self) -> Outcome:
        return self.outcomes["val"]

    def reference(self, parent: Elite) -> float:
        """The parent's score where the child was judged: on the sample when it stopped there."""
        return parent.score if self.gate is None or self.gate.passed else self.gate.parent


@dataclass(frozen=True)
class Judge:
    """Stage `judge` over the run's evaluator (search splits only) and draft environment (for cross-fitting)."""

    evaluator: Evaluator
    env: DraftEnvironment
    config: RunConfig

    def __call__(
        self,
        t: int,
        program_id: str,
        proposal: Proposal,
        sample: Minibatch | None,
        parent: Elite,
        state: RunState,
        drafts: Usage | None,
    ) -> Verdict:
        """Judge the child `proposal` of `parent`; what cross-fitting spends is added to `drafts`."""
        clock = time.perf_counter()
        evaluator = self.evaluator
        gate = None
        if proposal.discarded is not None:  # no child: recorded as an invalid program with the reason
            outcomes = {
                split: evaluator.failed(
                    split, f"discarded: {proposal.discarded}", sample.ids(split) if sample else None
                )
                for split in SEARCH_SPLITS
            }
        elif sample is not None:
            outcomes, gate = evaluate_child(
                evaluator,
                proposal.code,
                sample,
                state.train_rows[parent.program_id],
                state.val_rows[parent.program_id],
            )
        else:
            outcomes = {split: evaluator.evaluate(proposal.code, split) for split in SEARCH_SPLITS}
        if proposal.discarded is None and (
            gate is None or gate.passed
        ):  # whole splits: rows held as examples
            outcomes, variants = with_honest_train(self.env, evaluator.ai, proposal.code, outcomes)
            if drafts is not None and variants:
                drafts.merge(variants)
        ms = (time.perf_counter() - clock) * 1000.0
        cost = judge_child(self.config.cost_limit, self.config.prices, outcomes["val"], t, program_id)
        full = (sample is None or (gate is not None and gate.passed)) and cost.within
        return Verdict(outcomes, gate, cost, full, ms)
