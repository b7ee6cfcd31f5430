import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import org.apache.paimon.catalog.CatalogContext;
import org.apache.paimon.data.InternalRow;
import org.apache.paimon.fs.FileIO;
import org.apache.paimon.fs.Path;
import org.apache.paimon.fs.local.LocalFileIO;
import org.apache.paimon.options.Options;
import org.apache.paimon.reader.RecordReader;
import org.apache.paimon.table.source.ReadBuilder;
import org.apache.paimon.operation.LocalOrphanFilesClean;
import org.apache.paimon.options.ExpireConfig;
import org.apache.paimon.table.ExpireSnapshots;
import org.apache.paimon.table.FileStoreTable;
import org.apache.paimon.table.FileStoreTableFactory;

/**
 * Current Apache Paimon's own maintenance (paimon-bundle, the version tests/support/maven.py pins), one
 * command per JVM:
 *
 *   expire TABLE RETAIN_MIN RETAIN_MAX MAX_DELETES OLDER_THAN_MS   prints the number of snapshots expired and
 *                                                                 the milliseconds it took to set up
 *   orphans TABLE OLDER_THAN_MS                                   LocalOrphanFilesClean as a dry run: prints
 *                                                                 every path it would delete, sorted
 *   rows TABLE                                                    the latest snapshot's rows as "id dt", read
 *                                                                 through the FileIO of TABLE's scheme (Hadoop's
 *                                                                 for hdfs://)
 */
public final class CurrentPaimon {
    public static void main(String[] args) throws Exception {
        Path location = new Path(args[1]);
        FileIO io = args[0].equals("rows")
                ? FileIO.get(location, CatalogContext.create(new Options()))
                : LocalFileIO.create();
        FileStoreTable table = FileStoreTableFactory.create(io, location);
        switch (args[0]) {
            case "expire": {
                ExpireConfig.Builder b = ExpireConfig.builder()
                        .snapshotRetainMin(Integer.parseInt(args[2]))
                        .snapshotRetainMax(Integer.parseInt(args[3]))
                        .snapshotMaxDeletes(Integer.parseInt(args[4]));
                // ExpireSnapshotsImpl computes olderThan = now - timeRetained itself: take the duration last,
                // after a run that expires nothing has loaded its classes (a cold JVM drifts by 100 ms otherwise)
                table.newExpireSnapshots().config(ExpireConfig.builder().snapshotRetainMin(Integer.MAX_VALUE)
                        .snapshotRetainMax(Integer.MAX_VALUE).snapshotTimeRetain(Duration.ofDays(36500)).build())
                        .expire();
                ExpireSnapshots expire = table.newExpireSnapshots();
                long start = System.currentTimeMillis();
                expire.config(b.snapshotTimeRetain(Duration.ofMillis(start - Long.parseLong(args[5]))).build());
                long called = System.currentTimeMillis();
                // expire() reads the clock first thing: its cut-off is older-than plus about (called - start),
                // which the caller checks against the snapshot times
                int expired = expire.expire();
                System.out.println(expired + " " + (called - start));
                break;
            }
            case "rows": {
                ReadBuilder rb = table.newReadBuilder();
                List<String> rows = new ArrayList<>();
                try (RecordReader<InternalRow> reader = rb.newRead().createReader(rb.newScan().plan().splits())) {
                    reader.forEachRemaining(row -> rows.add(row.getLong(0) + " " + row.getString(3)));
                }
                Collections.sort(rows);
                rows.forEach(System.out::println);
                break;
            }
            case "orphans": {
                LocalOrphanFilesClean clean = new LocalOrphanFilesClean(table, Long.parseLong(args[2]), true);
                List<String> paths = new ArrayList<>();
                for (Path p : clean.clean().getDeletedFilesPath()) {
                    paths.add(p.toUri().getPath());
                }
                Collections.sort(paths);
                for (String p : paths) {
                    System.out.println(p);
                }
                break;
            }
            default:
                throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }
}
