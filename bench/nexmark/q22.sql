-- q22, get URL directories: the first three path parts of each bid's url
-- (SPLIT_INDEX counts from 0: https:, '', host, dir1, dir2, dir3).
SELECT auction, bidder, price, channel,
       SPLIT_INDEX(url, '/', 3) AS dir1,
       SPLIT_INDEX(url, '/', 4) AS dir2,
       SPLIT_INDEX(url, '/', 5) AS dir3
FROM bid;
