import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.MessageView;

/**
 * RocketMQ's gRPC SimpleConsumer (rocketmq-client-java) receiving and acking through RocketMQ's
 * proxy, in the same consumer group as staticmq's PopConsumer.
 *
 * <p>java -cp CLIENT_JAVA_JARS/*:CLASSES SimplePeer PROXY_ENDPOINT GROUP TOPIC starts the consumer,
 * prints "READY" and answers commands read from stdin, one a line, until "quit" or the end of its
 * input (started once, so no JVM start falls inside a message's invisible time), in the words of
 * PopPeer.java (tests/support/java_pop_peer.py drives both):
 * <p>"pop WANT TIMEOUT_S INVISIBLE_MS" receives up to WANT messages and prints "MSG body id" per one (each delivery
 * gets a fresh id, standing for its receipt handle), then "POPPED n" (n >= WANT unless TIMEOUT_S
 * ran out);
 * <p>"ack ID" acks that delivery and prints "ACK OK" or "ACK " and the error.
 */
public final class SimplePeer {
    public static void main(String[] args) throws Exception {
        String endpoint = args[0], group = args[1], topic = args[2];
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration conf = ClientConfiguration.newBuilder()
            .setEndpoints(endpoint)
            .enableSsl(false)
            .setRequestTimeout(Duration.ofSeconds(10))
            .build();
        SimpleConsumer consumer = provider.newSimpleConsumerBuilder()
            .setClientConfiguration(conf)
            .setConsumerGroup(group)
            .setAwaitDuration(Duration.ofSeconds(2))
            .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL))
            .build();
        Map<String, MessageView> delivered = new HashMap<>();
        int next = 0;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        System.out.println("READY");
        System.out.flush();
        for (String line = in.readLine(); line != null && !line.equals("quit"); line = in.readLine()) {
            String[] words = line.split(" ");
            if (words[0].equals("pop")) {
                int want = Integer.parseInt(words[1]);
                long deadline = System.currentTimeMillis() + 1000L * Long.parseLong(words[2]);
                Duration invisible = Duration.ofMillis(Long.parseLong(words[3]));
                int got = 0;
                while (got < want && System.currentTimeMillis() < deadline) {
                    List<MessageView> views = consumer.receive(Math.min(32, want - got), invisible);
                    for (MessageView view : views) {
                        String id = "d" + next++;
                        delivered.put(id, view);
                        System.out.println("MSG " + text(view.getBody()) + " " + id);
                        got++;
                    }
                    System.out.flush();
                }
                System.out.println("POPPED " + got);
            } else if (words[0].equals("ack")) {
                MessageView view = delivered.remove(words[1]);
                try {
                    consumer.ack(view);
                    System.out.println("ACK OK");
                } catch (Exception e) {
                    System.out.println("ACK " + e.toString().replace('\n', ' '));
                }
            } else {
                System.out.println("UNKNOWN " + line);
            }
            System.out.flush();
        }
        consumer.close();
        System.exit(0);
    }

    private static String text(ByteBuffer body) {
        byte[] bytes = new byte[body.remaining()];
        body.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }
}
