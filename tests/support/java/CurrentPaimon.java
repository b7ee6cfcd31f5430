import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.time.Duration;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.paimon.CoreOptions;
import org.apache.paimon.Snapshot;
import org.apache.paimon.catalog.CatalogContext;
import org.apache.paimon.consumer.ConsumerManager;
import org.apache.paimon.data.InternalRow;
import org.apache.paimon.fs.FileIO;
import org.apache.paimon.fs.Path;
import org.apache.paimon.fs.local.LocalFileIO;
import org.apache.paimon.options.Options;
import org.apache.paimon.reader.RecordReader;
import org.apache.paimon.table.source.ReadBuilder;
import org.apache.paimon.operation.LocalOrphanFilesClean;
import org.apache.paimon.operation.PartitionExpire;
import org.apache.paimon.options.ExpireConfig;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.paimon.table.ExpireSnapshots;
import org.apache.paimon.table.FileStoreTable;
import org.apache.paimon.table.FileStoreTableFactory;
import org.apache.paimon.tag.TagAutoCreation;
import org.apache.paimon.tag.TagTimeExpire;
import org.apache.paimon.utils.SnapshotManager;

/**
 * Current Apache Paimon's own maintenance (paimon-bundle, the version tests/support/maven.py pins), one
 * command per JVM:
 *
 *   expire TABLE RETAIN_MIN RETAIN_MAX MAX_DELETES OLDER_THAN_MS   prints the number of snapshots expired and
 *                                                                 the milliseconds it took to set up
 *   orphans TABLE OLDER_THAN_MS                                   LocalOrphanFilesClean as a dry run: prints
 *                                                                 every path it would delete, sorted
 *   expire_partitions TABLE NOW K=V...      the expire_partitions procedure's PartitionExpire at the local
 *                                           date-time NOW, with the options K=V over the table's (JSON)
 *   delete_tags TABLE NAME...               deleteTag of each, in order (JSON: the tags left)
 *   expire_tags TABLE [OLDER_THAN]          TagTimeExpire, withOlderThanTime when given (JSON: expired, left)
 *   auto_tag_create TABLE K=V...            TagAutoCreation#run with the options over the table's (JSON: left)
 *   expire_changelog TABLE RETAIN_MIN RETAIN_MAX TIME_RETAINED_MS MAX_DELETES
 *                                           ExpireChangelogImpl (JSON: expired)
 *   expire_consumers TABLE BRANCH EXPIRE_DATE_TIME   ConsumerManager#expire (JSON: the ids left)
 *   rows TABLE                                                    the latest snapshot's rows as "id dt", read
 *                                                                 through the FileIO of TABLE's scheme (Hadoop's
 *                                                                 for hdfs://)
 *
 * A failure prints "ERROR <exception class>: <message>" as the last line of stderr and exits with 1.
 */
public final class CurrentPaimon {
    private static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        try {
            run(args);
        } catch (Throwable e) {
            Throwable cause = e instanceof InvocationTargetException ? e.getCause() : e;
            cause.printStackTrace();
            System.err.println("ERROR " + cause.getClass().getName() + ": " + cause.getMessage());
            System.exit(1);
        }
    }

    private static void run(String[] args) throws Exception {
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
            case "expire_partitions":
                print(expirePartitions(table, LocalDateTime.parse(args[2]), options(args, 3)));
                break;
            case "delete_tags": {
                for (int i = 2; i < args.length; i++) {
                    table.deleteTag(args[i]);
                }
                ObjectNode res = JSON.createObjectNode();
                tagNames(table, res.putArray("left"));
                print(res);
                break;
            }
            case "expire_tags": {
                TagTimeExpire expire = TagTimeExpire.create(table.snapshotManager(), table.tagManager(),
                        table.store().newTagDeletion(), Collections.emptyList());
                if (args.length > 2) {
                    expire.withOlderThanTime(LocalDateTime.parse(args[2]));
                }
                ObjectNode res = JSON.createObjectNode();
                ArrayNode expired = res.putArray("expired");
                expire.expire().forEach(expired::add);
                tagNames(table, res.putArray("left"));
                print(res);
                break;
            }
            case "auto_tag_create": {
                FileStoreTable copy = table.copy(options(args, 2));
                TagAutoCreation creation = TagAutoCreation.create(copy.coreOptions(), copy.snapshotManager(),
                        copy.tagManager(), copy.store().newTagDeletion(), Collections.emptyList());
                if (creation == null) {
                    throw new IllegalArgumentException("the options create no tags automatically");
                }
                creation.run();
                ObjectNode res = JSON.createObjectNode();
                tagNames(copy, res.putArray("left"));
                print(res);
                break;
            }
            case "expire_changelog": {
                ExpireConfig config = ExpireConfig.builder()
                        .changelogRetainMin(Integer.parseInt(args[2]))
                        .changelogRetainMax(Integer.parseInt(args[3]))
                        .changelogTimeRetain(Duration.ofMillis(Long.parseLong(args[4])))
                        .changelogMaxDeletes(Integer.parseInt(args[5]))
                        .build();
                ObjectNode res = JSON.createObjectNode();
                res.put("expired", table.newExpireChangelog().config(config).expire());
                print(res);
                break;
            }
            case "expire_consumers": {
                ConsumerManager consumers = new ConsumerManager(LocalFileIO.create(), new Path(args[1]), args[2]);
                consumers.expire(LocalDateTime.parse(args[3]));
                List<String> ids = new ArrayList<>(consumers.listAllIds());
                Collections.sort(ids);
                ObjectNode res = JSON.createObjectNode();
                ids.forEach(res.putArray("left")::add);
                print(res);
                break;
            }
            default:
                throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }

    private static Map<String, String> options(String[] args, int from) {
        Map<String, String> options = new HashMap<>();
        for (int i = from; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            options.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        return options;
    }

    private static void print(ObjectNode node) throws Exception {
        System.out.println(JSON.writeValueAsString(node));
    }

    private static void tagNames(FileStoreTable table, ArrayNode out) {
        List<String> names = new ArrayList<>(table.tagManager().allTagNames());
        Collections.sort(names);
        names.forEach(out::add);
    }

    /**
     * As the expire_partitions procedure builds it (ProcedureUtils#fillInPartitionOptions: the arguments
     * as dynamic options over the table's, check interval 0, commit user ""), run through the
     * package-private expire(now, identifier) with Long.MAX_VALUE as the procedure passes it.
     */
    private static ObjectNode expirePartitions(FileStoreTable table, LocalDateTime now, Map<String, String> given)
            throws Exception {
        Map<String, String> dynamic = new HashMap<>(given);
        dynamic.put(CoreOptions.PARTITION_EXPIRATION_CHECK_INTERVAL.key(), "0");
        FileStoreTable copy = table.copy(dynamic);
        PartitionExpire expire = copy.store().newPartitionExpire("", copy);
        if (expire == null) {
            throw new IllegalArgumentException("Paimon made no PartitionExpire (no expiration time or no keys)");
        }
        Method run = PartitionExpire.class.getDeclaredMethod("expire", LocalDateTime.class, long.class);
        run.setAccessible(true);
        SnapshotManager sm = copy.snapshotManager();
        Long before = sm.latestSnapshotId();
        @SuppressWarnings("unchecked")
        List<Map<String, String>> expired = (List<Map<String, String>>) run.invoke(expire, now, Long.MAX_VALUE);
        ObjectNode res = JSON.createObjectNode();
        ArrayNode parts = res.putArray("expired");
        for (Map<String, String> spec : expired) {
            ObjectNode o = parts.addObject();
            spec.forEach(o::put);
        }
        ArrayNode snaps = res.putArray("snapshots");
        Long after = sm.latestSnapshotId();
        if (after != null) {
            for (long id = (before == null ? 1 : before + 1); id <= after; id++) {
                Snapshot s = sm.snapshot(id);
                ObjectNode o = snaps.addObject();
                o.put("id", s.id());
                o.put("commitKind", s.commitKind().name());
                o.put("commitUser", s.commitUser());
            }
        }
        return res;
    }
}
