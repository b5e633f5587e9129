/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.spark.ui;

import jakarta.servlet.http.HttpServletRequest;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.ui.UIUtils;
import org.apache.spark.ui.WebUIPage;
import org.apache.spark.util.kvstore.KVStore;
import org.apache.spark.util.kvstore.KVStoreIterator;
import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.xml.Node;
import scala.xml.Unparsed;

/**
 * The tab's one page: each table (commits, last version, records) and then each commit, newest
 * first, with its version, files (how many in place, rewritten, split), records, offsets, duration, VTTS and the Spark jobs it ran
 * (linked), zero-copy commits included. Rows carry {@code data-} attributes so tools can read them.
 */
final class CommitsPage extends WebUIPage {
    static final int SHOWN = 500; // commits listed, newest first

    private final CommitsTab tab;
    private final KVStore store;

    CommitsPage(CommitsTab tab, KVStore store) {
        super("");
        this.tab = tab;
        this.store = store;
    }

    @Override
    public Seq<Node> render(HttpServletRequest request) {
        List<CommitEvent> commits = newestFirst();
        String html = tables(commits) + commitTable(request, commits);
        return UIUtils.headerSparkPage(request, "Lakegate commits", () -> nodes(html), tab, Option.empty(), false, false);
    }

    private List<CommitEvent> newestFirst() {
        List<CommitEvent> out = new ArrayList<>();
        try (KVStoreIterator<CommitRow> it =
                store.view(CommitRow.class).index("arrival").reverse().closeableIterator()) {
            while (it.hasNext()) {
                out.add(it.next().commit);
            }
        } catch (Exception e) {
            throw new IllegalStateException("cannot read the Lakegate commits from the status store", e);
        }
        return out;
    }

    private static String tables(List<CommitEvent> commits) {
        Map<String, long[]> byTable = new LinkedHashMap<>(); // commits, last version, records, zero-copy
        Map<String, String> formats = new LinkedHashMap<>();
        for (CommitEvent c : commits) {
            long[] t = byTable.computeIfAbsent(c.table, k -> new long[] {0, c.version, 0, 0});
            t[0]++;
            t[2] += c.records;
            t[3] += c.zeroCopy() ? 1 : 0;
            formats.putIfAbsent(c.table, c.format);
        }
        StringBuilder out = new StringBuilder("<h4>Tables</h4><table class=\"table table-bordered table-sm\""
                + " id=\"lakegate-tables\"><thead><tr><th>Table</th><th>Format</th><th>Commits</th>"
                + "<th>Last version</th><th>Records</th><th>Zero-copy commits</th></tr></thead><tbody>");
        for (Map.Entry<String, long[]> e : byTable.entrySet()) {
            long[] t = e.getValue();
            out.append("<tr data-table=\"").append(escape(e.getKey())).append("\"><td>").append(escape(e.getKey()))
                    .append("</td><td>").append(escape(formats.get(e.getKey()))).append("</td><td>").append(t[0])
                    .append("</td><td>").append(t[1]).append("</td><td>").append(t[2]).append("</td><td>")
                    .append(t[3]).append("</td></tr>");
        }
        if (byTable.isEmpty()) {
            out.append("<tr><td colspan=\"6\">No commit yet.</td></tr>");
        }
        return out.append("</tbody></table>").toString();
    }

    private String commitTable(HttpServletRequest request, List<CommitEvent> commits) {
        StringBuilder out = new StringBuilder("<h4>Commits (newest first, at most " + SHOWN + ")</h4>"
                + "<table class=\"table table-bordered table-sm\" id=\"lakegate-commits\"><thead><tr>"
                + "<th>Table</th><th>Version</th><th>Committed</th><th>Files</th><th>Records</th>"
                + "<th>Offsets (next, per partition)</th><th>Duration</th><th>VTTS</th><th>Spark jobs</th>"
                + "<th>Commit id</th></tr></thead><tbody>");
        for (CommitEvent c : commits.subList(0, Math.min(SHOWN, commits.size()))) {
            out.append("<tr data-table=\"").append(escape(c.table)).append("\" data-version=\"").append(c.version)
                    .append("\" data-records=\"").append(c.records).append("\" data-files=\"").append(c.files)
                    .append("\" data-in-place=\"").append(c.inPlace).append("\" data-rewritten=\"").append(c.rewritten)
                    .append("\" data-split=\"").append(c.split)
                    .append("\" data-jobs=\"").append(jobIds(c)).append("\" data-offsets=\"").append(escape(c.offsets))
                    .append("\"><td>").append(escape(c.table)).append("</td><td>").append(c.version)
                    .append("</td><td>").append(Instant.ofEpochMilli(c.committedAtMs)).append("</td><td>")
                    .append(c.files).append(placed(c)).append("</td><td>").append(c.records).append("</td><td><code>")
                    .append(escape(c.offsets)).append("</code></td><td>")
                    .append(c.durationMs < 0 ? "-" : c.durationMs + " ms").append("</td><td>")
                    .append(c.vtts < 0 ? "-" : Instant.ofEpochMilli(c.vtts).toString()).append("</td><td>")
                    .append(jobLinks(request, c)).append("</td><td><code>").append(escape(c.commitId))
                    .append("</code></td></tr>");
        }
        if (commits.isEmpty()) {
            out.append("<tr><td colspan=\"10\">No commit yet.</td></tr>");
        }
        return out.append("</tbody></table>").toString();
    }

    /** How the commit's files went in, after their count: in place, rewritten, and split among those. */
    private static String placed(CommitEvent c) {
        if (c.inPlace < 0 || c.rewritten < 0) {
            return "";
        }
        return " (" + c.inPlace + " in place, " + c.rewritten + " rewritten" + (c.split > 0 ? ", " + c.split + " split" : "")
                + ")";
    }

    private static String jobIds(CommitEvent c) {
        StringBuilder ids = new StringBuilder();
        for (long id : c.sparkJobs) {
            ids.append(ids.length() == 0 ? "" : ",").append(id);
        }
        return ids.toString();
    }

    private String jobLinks(HttpServletRequest request, CommitEvent c) {
        if (c.zeroCopy()) {
            return "none (zero-copy: the log alone)";
        }
        StringBuilder links = new StringBuilder();
        for (long id : c.sparkJobs) {
            String href = UIUtils.prependBaseUri(request, tab.basePath(), "/jobs/job/?id=" + id);
            links.append(links.length() == 0 ? "" : " ").append("<a href=\"").append(escape(href)).append("\">")
                    .append(id).append("</a>");
        }
        return links.toString();
    }

    static String escape(String text) {
        if (text == null) {
            return "";
        }
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\"", "&quot;")
                .replace("'", "&#39;");
    }

    private static Seq<Node> nodes(String html) {
        List<Node> one = List.of(new Unparsed(html));
        return CollectionConverters.asScala(one).toSeq();
    }
}
