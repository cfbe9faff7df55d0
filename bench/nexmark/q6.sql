-- q6, average selling price by seller: each auction's winning bid (its highest bid made
-- during its lifetime, ties: the earliest; a Top-1 per auction over the whole stream, as
-- q9), then per seller the average of the winning prices of that auction and the seller's
-- ten auctions before it, in the order of the winning bids' times
-- (AVG ... OVER (... ROWS BETWEEN 10 PRECEDING AND CURRENT ROW): docs/sql.md, "Window
-- aggregates"). A higher bid takes the auction's row back and gives the new one, and the
-- averages of the rows after it in its frame change with it (a retract changelog). As
-- nexmark-flink's q6, with the auction id added to the window's ORDER BY so that winning
-- bids of one seller at the same millisecond have one order.
SELECT seller,
       AVG(final) OVER (PARTITION BY seller ORDER BY date_time, id ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS avg_price
FROM (
  SELECT A.id, A.seller, B.price AS final, B.date_time,
         ROW_NUMBER() OVER (PARTITION BY A.id, A.seller ORDER BY B.price DESC, B.date_time ASC) AS rownum
  FROM auction A JOIN bid B
    ON A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
) Q
WHERE rownum <= 1;
