"""The fair share as KAI's proportion plugin divides it (incidents.diagnosis.division.divide): deserved first,
then the spare by queue priority and over-quota weight, in whole-GPU rounds with the fractions left going to
the largest remainder."""

from __future__ import annotations

from incidents.diagnosis.division import Claim, divide


def test_a_queue_asking_more_than_its_part_takes_it_in_whole_gpus_the_rest_by_largest_remainder():
    claims = [Claim(n, None, None, 1, 10) for n in ("b", "a", "c")]
    # 10 / 3 each: 3 whole GPUs, 1/3 left over each; the one GPU left goes to the largest remainder, a tie by name
    assert divide(10, claims) == {"a": 4.0, "b": 3.0, "c": 3.0}
    # weights 3:1 of the one spare GPU: 0.75 and 0.25, neither a whole GPU; the larger remainder takes it
    assert divide(4, [Claim("q0", 1, None, 3, 10), Claim("q1", 2, None, 1, 10)]) == {"q0": 2.0, "q1": 2.0}


def test_what_a_queue_does_not_ask_goes_round_again_to_the_others():
    # a asks 2 of its offer of 5 and b takes 5; the 3 left go round again, all to b
    assert divide(10, [Claim("a", None, None, 1, 2), Claim("b", None, None, 1, 20)]) == {"a": 2.0, "b": 8.0}


def test_the_higher_queue_priority_is_served_first_and_a_zero_weight_gets_nothing_over_its_quota():
    claims = [Claim("low", 1, None, 1, 3, priority=0), Claim("high", 1, None, 1, 3, priority=1)]
    assert divide(5, claims) == {"low": 2.0, "high": 3.0}
    assert divide(5, [Claim("z", 1, None, 0, 5), Claim("w", 1, None, 1, 5)]) == {"z": 1.0, "w": 4.0}
