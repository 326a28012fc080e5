"""``GET /allocation_candidates`` read and written: the query-string mini-languages (``query``),
the query as a ``CandidateQuery`` (``candidate_query``), and the answer's body
(``candidate_answer``)."""
