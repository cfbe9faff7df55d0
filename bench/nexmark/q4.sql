-- q4, average price per category: the winning (highest) bid of each auction among the bids
-- made during its lifetime (B.date_time BETWEEN A.date_time AND A.expires), then the
-- average of those winning prices per category. Both aggregations are without a window:
-- an auction's maximum changes as bids arrive, and the average takes back the old maximum
-- before adding the new one (docs/sql.md, "Changelogs"). nexmark-flink writes the join as
-- FROM auction A, bid B WHERE ...; rsql needs the equality in ON.
SELECT Q.category, AVG(Q.final) AS avg_final
FROM (
  SELECT MAX(B.price) AS final, A.category
  FROM auction A JOIN bid B
    ON A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
  GROUP BY A.id, A.category
) Q
GROUP BY Q.category;
