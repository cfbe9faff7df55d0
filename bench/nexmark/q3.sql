-- q3, local item suggestion: the auctions of category 10 whose seller lives in Oregon,
-- Idaho or California, with the seller's name and city.
-- A regular join of two streams (auction ⋈ person on the seller), as nexmark-flink writes
-- it. rsql keeps both sides for the state TTL (without one the join is exact and keeps its
-- rows for ever: neither stream deletes rows). An auction's seller is one of the
-- 1,000 newest people or one of the next 10 (docs/nexmark.md), so a person is needed for
-- the next 50,000 events and an auction for the next 500: one minute of event time covers
-- that at every event rate from about 1,000 events per second up, where the result is
-- exactly the unbounded join's.
SET state_ttl = '1 minute';
SELECT P.name, P.city, P.state, A.id
FROM auction AS A INNER JOIN person AS P ON A.seller = P.id
WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA');
