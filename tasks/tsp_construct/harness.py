"""The tsp_construct harness: build one closed tour per instance with the program's `select_next_node`, and
measure it outside the sandbox.

Trusted pack code in two parts. `run` runs inside the Python sandbox next to the program (which can reach and
change anything there, this module's globals included): for an instance of n points it starts at node 0 and,
while more than one node is unvisited, calls

    select_next_node(current_node, destination_node, unvisited_nodes, distance_matrix)

with `destination_node` = 0 (the tour returns there), `unvisited_nodes` a fresh int64 numpy array of the
unvisited nodes in increasing order and `distance_matrix` the n x n Euclidean distances (read-only). The last
unvisited node follows without a call, and the tour closes back to node 0, as in LLM4AD's TSP-Construct.

The answer must be an integer (a Python or numpy int) naming an unvisited node; anything else fails the instance
with the reason. `run` returns the tour, a list of node numbers.

`measure` runs in coco-sql's own process, on its own copy of the instance: it checks that the tour visits every
node of the instance exactly once and returns the closed tour's length, the instance's output. So a program that
writes into the matrix it was given, or replaces anything in the sandbox, changes only the tour it builds, and a
tour is scored by what it really is.
"""

import math
import operator

import numpy as np


def run(select_next_node, instance):
    xs = tuple(float(v) for v in instance["x"])
    ys = tuple(float(v) for v in instance["y"])
    n = len(xs)
    if n != len(ys) or n < 2:
        raise ValueError(f"instance has {len(xs)} x and {len(ys)} y coordinates")
    points = np.column_stack((xs, ys))
    distance_matrix = np.sqrt(((points[:, None, :] - points[None, :, :]) ** 2).sum(axis=2))
    distance_matrix.setflags(write=False)
    unvisited = list(range(1, n))
    remaining = set(unvisited)
    tour = [0]
    current = 0
    while len(unvisited) > 1:
        answer = select_next_node(current, 0, np.array(unvisited, dtype=np.int64), distance_matrix)
        try:
            node = operator.index(answer)
        except TypeError:
            raise TypeError(f"select_next_node returned {answer!r}, not a node number") from None
        if node not in remaining:
            raise ValueError(f"select_next_node returned {node}, which is not an unvisited node")
        remaining.discard(node)
        unvisited.remove(node)
        tour.append(node)
        current = node
    tour.append(unvisited[0])
    return tour


def measure(tour, instance):
    """The length of the closed tour `run` returned, from this process's copy of the coordinates; ValueError
    when it is not a permutation of the instance's nodes."""
    xs = tuple(float(v) for v in instance["x"])
    ys = tuple(float(v) for v in instance["y"])
    n = len(xs)
    if (
        type(tour) is not list
        or len(tour) != n
        or any(type(node) is not int for node in tour)
        or sorted(tour) != list(range(n))
    ):
        raise ValueError(f"the tour is not a permutation of the instance's {n} nodes")
    return tour_length(xs, ys, tour)


def tour_length(xs, ys, tour):
    """The closed tour's Euclidean length."""
    return math.fsum(
        math.hypot(xs[a] - xs[b], ys[a] - ys[b]) for a, b in zip(tour, tour[1:] + tour[:1], strict=True)
    )
